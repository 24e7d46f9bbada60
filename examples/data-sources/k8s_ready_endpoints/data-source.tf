data "k8s_ready_endpoints" "web" {
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

# [{ address = "10.0.1.7", port = 8080, address_type = "IPv4", pod = "web-6d4cf56db6-x7x9k", ... }, ...]
output "web_pool" {
  value = [for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}"]
}
