data "k8s_ready_endpoints" "web" {
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

# ["10.0.1.7:8080", "10.0.1.9:8080", "[fd00::7]:8080"]
output "members" {
  value = provider::k8s::members(data.k8s_ready_endpoints.web.endpoints)
}
