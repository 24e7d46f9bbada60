# One AWS target group of type "ip" per Service labelled lb=nlb, in every
# namespace, its targets the ready pods: one read of the cluster feeds them
# all. The pod addresses must be routable from the load balancer (for example
# the AWS VPC CNI on EKS). Reading all namespaces needs a ClusterRole
# (examples/rbac/clusterrole.yaml).

terraform {
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
    k8s = {
      source = "vigie/k8s"
    }
  }
}

variable "vpc_id" {
  type = string
}

data "k8s_services" "nlb" {
  all_namespaces = true
  label_selector = "lb=nlb"
  port_name      = "http"
  address_type   = "IPv4"
}

resource "aws_lb_target_group" "pool" {
  for_each = data.k8s_services.nlb.services

  # AWS wants names unique in the region, of at most 32 letters, digits and
  # hyphens, not ending in a hyphen: the start of "<namespace>-<name>" (23
  # characters at most, trailing hyphens cut) and 8 hex digits of a hash of
  # the whole key, so that two Services whose names share their first 23
  # characters still get two names.
  name        = "${replace(substr(replace(each.key, "/", "-"), 0, 23), "/-+$/", "")}-${substr(sha256(each.key), 0, 8)}"
  target_type = "ip"
  protocol    = "TCP"
  port        = 8080
  vpc_id      = var.vpc_id
}

locals {
  # One attachment per Service and member, keyed so that a pod going away
  # removes exactly one attachment.
  targets = merge([
    for key, svc in data.k8s_services.nlb.services : {
      for e in svc.endpoints : "${key}/${e.address}:${e.port}" => { service = key, address = e.address, port = e.port }
    }
  ]...)
}

resource "aws_lb_target_group_attachment" "pool" {
  for_each = local.targets

  target_group_arn = aws_lb_target_group.pool[each.value.service].arn
  target_id        = each.value.address
  port             = each.value.port
}
