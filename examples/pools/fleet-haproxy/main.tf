# One HAProxy backend per Service: every Service of namespace shop labelled
# lb=haproxy gets a backend of its ready pods, from ONE read of the cluster. A
# Service labelled later becomes one more backend at the next apply, with no
# change here.

terraform {
  required_providers {
    k8s = {
      source = "vigie/k8s"
    }
  }
}

data "k8s_services" "haproxy" {
  namespace      = "shop"
  label_selector = "lb=haproxy"
  port_name      = "http"
  min_ready      = 1 # no backend is ever written empty after a bad rollout
  # Each server checked as its pod's readinessProbe: one more LIST, of the
  # namespace's Pods (needs list on pods).
  pod_health_checks = true
  min_services      = 1

  timeouts {
    read = "2m" # wait for a rollout rather than fail at once
  }
}

# One backend section per Service, keyed by "<namespace>/<name>": write it
# where your HAProxy configuration management picks it up.
output "haproxy_backends" {
  value = join("\n", [
    for key, svc in data.k8s_services.haproxy.services : templatefile("${path.module}/backend.cfg.tftpl", {
      name      = replace(key, "/", "_")
      endpoints = svc.endpoints
    })
  ])
}
