# Keeps an NGINX upstream current with the ready pods of a Service, both
# address families: provider::k8s::members gives "address:port" with IPv6
# addresses in brackets, as NGINX reads them (Terraform 1.8+ or OpenTofu
# 1.7+).
#
# The data source reads the pool, templatefile renders the upstream
# (upstream.conf.tftpl), and terraform_data.nginx_upstream, replaced only
# when the rendered text changes, runs apply-pool.sh, which:
#   1. writes the upstream to a temporary file beside pool_file and renames
#      it over pool_file, so that NGINX never reads half a file;
#   2. checks the whole configuration with NGINX itself (check_command,
#      nginx -t); a configuration NGINX refuses puts the previous file back
#      and fails the apply, and NGINX goes on serving what it has;
#   3. reloads NGINX gracefully (reload_command): new workers take the new
#      upstream, the old ones finish their connections.
# site.conf beside is a server that proxies to the upstream. Keep the files
# together; set the variables to your paths.
#
# NGINX refuses an upstream that has no server ("no servers are inside
# upstream"). When the Service has no ready pod, the template writes one
# placeholder server marked down: NGINX loads the configuration, its other
# upstreams keep serving, and this one answers 502 until a pod is ready and
# the next apply writes it. To keep the previous upstream instead, set
# min_ready = 1: the read then fails and nothing is written.
#
# The sync companion (terraform-provider-k8s sync) applies
# terraform_data.nginx_upstream whenever the pool changes: it depends on the
# data source.

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

variable "pool_file" {
  description = "The upstream file NGINX includes in its http block"
  type        = string
  default     = "/etc/nginx/conf.d/k8s-pool.conf"
}

variable "check_command" {
  description = "Checks the whole configuration, pool_file included, before any reload (run by sh in terraform's working directory)"
  type        = string
  default     = "nginx -t -q"
}

variable "reload_command" {
  description = "Reloads NGINX gracefully: nginx -s reload (SIGHUP to the master), or systemctl reload nginx"
  type        = string
  default     = "nginx -s reload"
}

data "k8s_ready_endpoints" "web" {
  namespace = var.namespace
  service   = var.service
  port_name = var.port_name
}

locals {
  nginx_upstream = templatefile("${path.module}/upstream.conf.tftpl", {
    name    = "${var.namespace}_${var.service}"
    members = provider::k8s::members(data.k8s_ready_endpoints.web.endpoints)
  })
}

resource "terraform_data" "nginx_upstream" {
  input = local.nginx_upstream
  # Replaced, and so delivered and reloaded, only when the text changes.
  triggers_replace = local.nginx_upstream

  provisioner "local-exec" {
    command = "sh '${path.module}/apply-pool.sh'"
    # The text goes in an environment variable: up to 128 KiB on Linux,
    # about two thousand servers.
    environment = {
      POOL_TEXT      = self.input
      POOL_FILE      = var.pool_file
      CHECK_COMMAND  = var.check_command
      RELOAD_COMMAND = var.reload_command
    }
  }
}

output "nginx_upstream" {
  value = local.nginx_upstream
}
