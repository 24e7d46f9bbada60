# One HAProxy backend whose servers are the ready pods of the same Service in
# two clusters, each read through a provider configuration of its own (an
# alias, with its own context, or its own kubeconfig). It works with every
# Terraform and OpenTofu version the provider supports; for a map of
# clusters of any size, OpenTofu 1.9+ can make the provider configurations
# with for_each instead: see opentofu-for-each/.
#
# The output's precondition is the guard of the whole pool: a cluster may be
# empty (being drained, or down for an upgrade) while the other serves, but
# the backend is never written without a ready pod in any cluster. A
# per-cluster min_ready would stop the apply whenever one cluster is empty.

terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

variable "kubeconfig" {
  description = "Kubeconfig with a context per cluster"
  type        = string
  default     = "~/.kube/config"
}

provider "k8s" {
  alias      = "blue"
  kubeconfig = var.kubeconfig
  context    = "blue"
}

provider "k8s" {
  alias      = "green"
  kubeconfig = var.kubeconfig
  context    = "green"
}

data "k8s_ready_endpoints" "blue" {
  provider  = k8s.blue
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

data "k8s_ready_endpoints" "green" {
  provider  = k8s.green
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

locals {
  pools = {
    blue  = data.k8s_ready_endpoints.blue.endpoints
    green = data.k8s_ready_endpoints.green.endpoints
  }
}

output "haproxy_backend" {
  value = templatefile("${path.module}/backend.cfg.tftpl", {
    name  = "shop_web"
    pools = local.pools
  })

  precondition {
    condition     = length(flatten(values(local.pools))) > 0
    error_message = "No cluster has a ready pod of shop/web: the backend is not written."
  }
}
