# An HAProxy backend whose servers are the nodes of the cluster, on the
# nodePort of a Service, for an HAProxy that cannot reach pod IPs. With
# externalTrafficPolicy: Local only the nodes that run a ready pod are given,
# and each node is weighted by the number of pods it runs (local_endpoints),
# so that every pod gets an even share, as kube-proxy sends a node's traffic
# to its own pods only. With Cluster, every node is given and kube-proxy
# spreads the traffic over all pods from any node: set
# weight_by_local_endpoints = false to give every node the same weight.
#
# Each node is health-checked as cloud load balancers check it: on the
# Service's healthCheckNodePort for externalTrafficPolicy: Local (kube-proxy
# answers /healthz with 200 only on nodes that run a ready pod of the
# Service), else on kube-proxy's health port (10256, failing on a node that is
# being deleted or drained by the autoscaler). HAProxy thus takes a node out
# between two plans. Every node of one pool has the same check.

terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

variable "namespace" {
  type    = string
  default = "shop"
}

variable "service" {
  type    = string
  default = "web"
}

variable "weight_by_local_endpoints" {
  description = "true for a Service with externalTrafficPolicy: Local, false for Cluster"
  type        = bool
  default     = true
}

data "k8s_ready_endpoints" "web" {
  namespace         = var.namespace
  service           = var.service
  port_name         = "http"
  target            = "nodes"
  node_address_type = "InternalIP"
  # Only the nodes of the ingress pool, if the cluster has one.
  # node_selector = "node-role.kubernetes.io/ingress"
  min_ready = 1
}

output "haproxy_backend" {
  value = templatefile("${path.module}/backend.cfg.tftpl", {
    name       = "${var.namespace}_${var.service}_nodes"
    check_path = try(data.k8s_ready_endpoints.web.endpoints[0].health_check.path, "/healthz")
    # local_endpoints is at least 1 for every node of a Local Service.
    servers = [for e in data.k8s_ready_endpoints.web.endpoints : {
      # A dual-stack node gives one entry per family: one server each.
      name    = "${e.node_name}-${lower(e.address_type)}"
      address = e.address_type == "IPv6" ? "[${e.address}]" : e.address
      port    = e.port
      weight  = var.weight_by_local_endpoints ? min(e.local_endpoints, 256) : 1
      # The Service's healthCheckNodePort, or kube-proxy's health port.
      check_port = e.health_check.port
    }]
  })
}
