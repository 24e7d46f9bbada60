# An HAProxy backend whose servers are the ready pods of a Service, rendered
# with templatefile. Write it where your HAProxy configuration management picks
# it up (a local_file resource, a config map, an Ansible variable...).

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

output "haproxy_backend" {
  value = templatefile("${path.module}/backend.cfg.tftpl", {
    name      = "${var.namespace}_${var.service}"
    endpoints = data.k8s_ready_endpoints.web.endpoints
  })
}

output "endpoints" {
  value = data.k8s_ready_endpoints.web.endpoints
}
