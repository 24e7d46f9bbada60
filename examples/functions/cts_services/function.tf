data "k8s_ready_endpoints" "web" {
  namespace             = "shop"
  service               = "web"
  port_name             = "http"
  terminating_endpoints = "fallback"
}

# A module written for Consul-Terraform-Sync, fed by Kubernetes: its
# variable "services" takes the function's result unchanged.
module "haproxy_backend" {
  source   = "./haproxy-backend" # a copy of examples/cts/haproxy-backend, shown below
  services = provider::k8s::cts_services(data.k8s_ready_endpoints.web)
}

# The same Service given as an object, with the labels that become meta:
output "services" {
  value = provider::k8s::cts_services({
    namespace = "shop"
    name      = "web"
    labels    = { app = "web", tier = "front" }
    endpoints = data.k8s_ready_endpoints.web.endpoints
  })
}
