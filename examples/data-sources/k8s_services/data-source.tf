# Every Service of namespace shop labelled lb=external, with its pool, in one read.
data "k8s_services" "shop" {
  namespace      = "shop"
  label_selector = "lb=external"
  port_name      = "http"
  min_services   = 1 # a selector typo must not empty every pool
}

# { "shop/web" = ["10.0.1.7:8080", ...], "shop/api" = [...] }
output "pools" {
  value = {
    for key, svc in data.k8s_services.shop.services :
    key => [for e in svc.endpoints : "${e.address}:${e.port}"]
  }
}

# Services that match but lack port http, with the reason.
output "skipped" {
  value = data.k8s_services.shop.skipped
}
