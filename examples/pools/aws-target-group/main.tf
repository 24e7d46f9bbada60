# An AWS Network or Application Load Balancer target group of type "ip" whose
# targets are the ready pods of a Service. The pod addresses must be routable
# from the load balancer (for example the AWS VPC CNI on EKS).

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

data "k8s_ready_endpoints" "web" {
  namespace = "shop"
  service   = "web"
  port_name = "http"
}

resource "aws_lb_target_group" "web" {
  name        = "shop-web"
  target_type = "ip"
  protocol    = "TCP"
  port        = 8080
  vpc_id      = var.vpc_id
}

# Keyed by address and port, so a pod that goes away removes exactly one
# attachment and the others stay untouched.
resource "aws_lb_target_group_attachment" "web" {
  for_each = {
    for e in data.k8s_ready_endpoints.web.endpoints : "${e.address}:${e.port}" => e
    if e.address_type == "IPv4"
  }

  target_group_arn = aws_lb_target_group.web.arn
  target_id        = each.value.address
  port             = each.value.port
}
