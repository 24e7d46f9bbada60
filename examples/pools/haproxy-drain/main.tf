# An HAProxy backend that drains pods gracefully during a rollout: ready pods
# get traffic, terminating pods that still serve stay in the backend with
# weight 0 (HAProxy's drain: no new connections, open ones finish). The read
# fails instead of rendering a backend with fewer than two ready servers
# (min_ready counts ready pods only, never draining ones), after waiting up to
# five minutes for the rollout to bring them.

terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

data "k8s_ready_endpoints" "web" {
  namespace             = "shop"
  service               = "web"
  port_name             = "http"
  terminating_endpoints = "include"
  min_ready             = 2
  # Each server checked as its pod's readinessProbe (needs list on pods).
  pod_health_checks = true

  timeouts {
    read = "5m"
  }
}

output "haproxy_backend" {
  value = templatefile("${path.module}/backend.cfg.tftpl", {
    name      = "shop_web"
    endpoints = data.k8s_ready_endpoints.web.endpoints
    # Draining pods get weight 0 only beside a ready one: a backend whose
    # every server has weight 0 answers 503.
    drain = anytrue([for e in data.k8s_ready_endpoints.web.endpoints : e.ready])
  })
}

# How current the answer is: when the last change it reflects happened.
output "as_of" {
  value = data.k8s_ready_endpoints.web.last_change_trigger_time
}
