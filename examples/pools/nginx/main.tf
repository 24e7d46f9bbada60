# An NGINX upstream of the ready pods of a Service, both address families:
# provider::k8s::members gives "address:port" with IPv6 addresses in
# brackets, as NGINX reads them (Terraform 1.8+ or OpenTofu 1.7+).
#
# NGINX refuses to start with an upstream that has no server ("no servers
# are inside upstream"). When the Service has no ready pod, the template
# writes one placeholder server marked down: NGINX loads the configuration,
# its other upstreams keep serving, and this one answers 502 until a pod is
# ready and the next apply writes it. To keep the previous upstream instead,
# set min_ready = 1: the read then fails and nothing is written.

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

variable "port_name" {
  type    = string
  default = "http"
}

data "k8s_ready_endpoints" "web" {
  namespace = var.namespace
  service   = var.service
  port_name = var.port_name
}

output "nginx_upstream" {
  value = templatefile("${path.module}/upstream.conf.tftpl", {
    name    = "${var.namespace}_${var.service}"
    members = provider::k8s::members(data.k8s_ready_endpoints.web.endpoints)
  })
}
