# An HAProxy backend whose servers are the nodes of the cluster, on the
# nodePort of a Service, for an HAProxy that cannot reach pod IPs. With
# externalTrafficPolicy: Local only the nodes that run a ready pod are given,
# and each node is weighted by the number of pods it runs (local_endpoints),
# so that every pod gets an even share, as kube-proxy sends a node's traffic
# to its own pods only. With Cluster, every node is given and kube-proxy
# spreads the traffic over all pods from any node: set
# weight_by_local_endpoints = false to give every node the same weight.

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
    name = "${var.namespace}_${var.service}_nodes"
    # local_endpoints is at least 1 for every node of a Local Service.
    servers = [for e in data.k8s_ready_endpoints.web.endpoints : {
      # A dual-stack node gives one entry per family: one server each.
      name    = "${e.node_name}-${lower(e.address_type)}"
      address = e.address_type == "IPv6" ? "[${e.address}]" : e.address
      port    = e.port
      weight  = var.weight_by_local_endpoints ? min(e.local_endpoints, 256) : 1
    }]
  })
}
