# Keeps an HAProxy backend current with the ready pods of a Service.
#
# The data source reads the pool, templatefile renders the backend
# (backend.cfg.tftpl), and terraform_data.haproxy_backend, replaced only when
# the rendered text changes, runs apply-pool.sh, which:
#   1. writes the backend to a temporary file beside pool_file and renames it
#      over pool_file, so that HAProxy never reads half a file;
#   2. checks the whole configuration with HAProxy itself (check_command,
#      haproxy -c); a configuration HAProxy refuses puts the previous file
#      back and fails the apply, and HAProxy goes on serving what it has;
#   3. saves what the health checks learned (save_state_command: `show
#      servers state` into the server-state-file), so that a server the
#      checks found down stays down across the reload;
#   4. reloads HAProxy gracefully (reload_command): new workers take the new
#      backend, the old ones finish their connections.
# haproxy.cfg beside holds the lines the main configuration needs for this
# (the runtime API socket, the server-state-file, v6only on IPv6 binds).
# Keep the three files together; set the variables to your paths.
#
# Each server is health-checked as the kubelet checks its pod: with
# pod_health_checks, every endpoint carries its pod's readinessProbe (port,
# and path for an HTTP probe), so HAProxy takes a pod out the moment it stops
# being ready, without waiting for the next apply. That reads the Pods behind
# the Service: the provider's identity needs `list` on `pods`
# (examples/rbac/role.yaml). The backend asks the path of the first pod with
# an HTTP probe (a Service's pods share theirs, but during a rollout that
# changes it); a pod with a tcpSocket probe, or none, gets a TCP check.
#
# The sync companion (terraform-provider-k8s sync) applies
# terraform_data.haproxy_backend whenever the pool changes: it depends on the
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

variable "terminating_endpoints" {
  description = "exclude (a terminating pod leaves the pool at once, while it still serves its grace period) or fallback (as exclude while any pod is ready); see the rollout guide"
  type        = string
  default     = "exclude"
}

variable "pool_file" {
  description = "The backend file HAProxy loads (a second -f, or a file of a directory given to -f)"
  type        = string
  default     = "/etc/haproxy/conf.d/k8s-pool.cfg"
}

variable "check_command" {
  description = "Checks the whole configuration, pool_file included, before any reload (run by sh in terraform's working directory)"
  type        = string
  default     = "haproxy -c -q -f /etc/haproxy/haproxy.cfg -f /etc/haproxy/conf.d"
}

variable "save_state_command" {
  description = "Saves the servers' health states into the server-state-file before the reload; \"\" for none"
  type        = string
  default     = "echo 'show servers state' | socat stdio unix-connect:/run/haproxy/admin.sock > /var/lib/haproxy/server-state"
}

variable "reload_command" {
  description = "Reloads HAProxy gracefully: systemctl reload haproxy, SIGUSR2 to the master (kill -USR2 \"$(cat /run/haproxy.pid)\"), or `reload` on its master socket"
  type        = string
  default     = "systemctl reload haproxy"
}

data "k8s_ready_endpoints" "web" {
  namespace             = var.namespace
  service               = var.service
  port_name             = var.port_name
  terminating_endpoints = var.terminating_endpoints
  pod_health_checks     = true
}

locals {
  haproxy_backend = templatefile("${path.module}/backend.cfg.tftpl", {
    name      = "${var.namespace}_${var.service}"
    endpoints = data.k8s_ready_endpoints.web.endpoints
  })
}

resource "terraform_data" "haproxy_backend" {
  input = local.haproxy_backend
  # Replaced, and so delivered and reloaded, only when the text changes.
  triggers_replace = local.haproxy_backend

  provisioner "local-exec" {
    command = "sh '${path.module}/apply-pool.sh'"
    # The text goes in an environment variable: up to 128 KiB on Linux,
    # about a thousand servers.
    environment = {
      POOL_TEXT          = self.input
      POOL_FILE          = var.pool_file
      CHECK_COMMAND      = var.check_command
      SAVE_STATE_COMMAND = var.save_state_command
      RELOAD_COMMAND     = var.reload_command
    }
  }
}

output "haproxy_backend" {
  value = local.haproxy_backend
}

output "endpoints" {
  value = data.k8s_ready_endpoints.web.endpoints
}
