# The pods of Deployment web declare the gate in their template:
#
#   spec:
#     readinessGates:
#       - conditionType: k8s.example/pool-web
#
# The pool holds the pods that wait for it (gate_pending = true)...
data "k8s_ready_endpoints" "web" {
  namespace      = "shop"
  service        = "web"
  readiness_gate = "k8s.example/pool-web"
}

# ...the load balancer is given the pool (here a stand-in for an HAProxy
# backend, a target group, an F5 pool)...
resource "terraform_data" "load_balancer" {
  input = sort([for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"])
}

# ...and only then the gate of the pods it now holds opens: Kubernetes
# counts them Ready and the rollout goes on.
resource "k8s_readiness_gate" "web" {
  namespace      = "shop"
  readiness_gate = "k8s.example/pool-web"
  pods           = [for e in data.k8s_ready_endpoints.web.endpoints : e.pod if e.pod != null]

  depends_on = [terraform_data.load_balancer]
}
