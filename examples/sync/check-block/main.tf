# The daemon-free pattern: a check block reads the pool afresh and asserts
# that it is what was applied. `terraform plan -refresh-only` (and HCP
# Terraform's health assessments, which run it between runs) then warn when
# the pool went stale, without changing anything.
terraform {
  required_providers {
    k8s = { source = "vigie/k8s" }
  }
}

variable "namespace" {
  type = string
}

variable "service" {
  type = string
}

data "k8s_ready_endpoints" "pool" {
  namespace = var.namespace
  service   = var.service
  port_name = "http"
}

# What the load balancer was given; stands for your pool resource.
resource "terraform_data" "pool" {
  input = [for e in data.k8s_ready_endpoints.pool.endpoints : "${e.address}:${e.port}"]
}

check "pool_is_current" {
  data "k8s_ready_endpoints" "now" {
    namespace = var.namespace
    service   = var.service
    port_name = "http"
  }

  assert {
    condition     = [for e in data.k8s_ready_endpoints.now.endpoints : "${e.address}:${e.port}"] == terraform_data.pool.output
    error_message = "The pool of ${var.namespace}/${var.service} is stale: run terraform apply, or run terraform-provider-k8s sync."
  }
}
