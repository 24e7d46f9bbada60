# Zone-local target groups: one AWS target group per availability zone, each
# with the IPv4 pods of its own zone, so that cross-zone traffic (and its cost)
# stays off the pod network.

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

variable "zones" {
  type    = set(string)
  default = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
}

data "k8s_ready_endpoints" "web" {
  for_each = var.zones

  namespace    = "shop"
  service      = "web"
  port_name    = "http"
  address_type = "IPv4"
  zones        = [each.key]
  # A zone's pool may not go empty through this apply.
  min_ready = 1
}

resource "aws_lb_target_group" "web" {
  for_each = var.zones

  name        = "shop-web-${each.key}"
  target_type = "ip"
  protocol    = "TCP"
  port        = 8080
  vpc_id      = var.vpc_id
}

resource "aws_lb_target_group_attachment" "web" {
  for_each = merge([
    for zone, pool in data.k8s_ready_endpoints.web : {
      for e in pool.endpoints : "${zone}/${e.address}:${e.port}" => merge(e, { zone_key = zone })
    }
  ]...)

  target_group_arn  = aws_lb_target_group.web[each.value.zone_key].arn
  target_id         = each.value.address
  port              = each.value.port
  availability_zone = each.value.zone
}
