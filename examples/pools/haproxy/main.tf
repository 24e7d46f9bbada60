# An HAProxy backend whose servers are the ready pods of a Service, rendered
# with templatefile. Write it where your HAProxy configuration management picks
# it up (a local_file resource, a config map, an Ansible variable...).
#
# Each server is health-checked as the kubelet checks its pod: with
# pod_health_checks, every endpoint carries its pod's readinessProbe (port,
# and path for an HTTP probe), so HAProxy takes a pod out the moment it stops
# being ready, without waiting for the next plan. That reads the Pods behind
# the Service: the provider's identity needs `list` on `pods`
# (examples/rbac/role.yaml). The backend asks the path of the first pod with
# an HTTP probe (a Service's pods share theirs, but during a rollout that
# changes it); a pod with a tcpSocket probe, or none, gets a TCP check.

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
  namespace         = var.namespace
  service           = var.service
  port_name         = var.port_name
  pod_health_checks = true
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
