# The pool of ../main.tf over a map of clusters of any size, with OpenTofu
# 1.9+: one provider configuration per cluster by for_each, and one read per
# cluster through it. Terraform has no for_each on provider blocks; use
# ../main.tf there, one alias per cluster.

terraform {
  required_version = ">= 1.9.0"
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

variable "clusters" {
  description = "Each cluster's kubeconfig and context, by a name that prefixes its servers"
  type = map(object({
    kubeconfig = string
    context    = string
  }))
}

provider "k8s" {
  alias      = "cluster"
  for_each   = var.clusters
  kubeconfig = each.value.kubeconfig
  context    = each.value.context
}

data "k8s_ready_endpoints" "web" {
  for_each  = var.clusters
  provider  = k8s.cluster[each.key]
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

locals {
  pools = { for name, pool in data.k8s_ready_endpoints.web : name => pool.endpoints }
}

output "haproxy_backend" {
  value = templatefile("${path.module}/../backend.cfg.tftpl", {
    name  = "shop_web"
    pools = local.pools
  })

  precondition {
    condition     = length(flatten(values(local.pools))) > 0
    error_message = "No cluster has a ready pod of shop/web: the backend is not written."
  }
}
