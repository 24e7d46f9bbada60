# An NGINX upstream of the ready pods of a Service, one per address family,
# for an NGINX that only routes IPv4.

terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

data "k8s_ready_endpoints" "api" {
  namespace = "shop"
  service   = "api"
  port_name = "grpc"
}

locals {
  ipv4 = [for e in data.k8s_ready_endpoints.api.endpoints : e if e.address_type == "IPv4"]
}

output "nginx_upstream" {
  value = templatefile("${path.module}/upstream.conf.tftpl", {
    name      = "shop_api"
    endpoints = local.ipv4
  })
}
