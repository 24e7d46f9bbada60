# A small module written the way CTS modules are: it only reads var.services.
# It renders an HAProxy backend: passing instances take traffic, warning ones
# (draining pods) keep their connections with weight 0, critical ones are left
# out. When no instance is passing (terminating_endpoints = "fallback" gives
# the draining pods exactly then), the warning ones take the traffic: a
# backend whose every server has weight 0 answers 503. HAProxy server names
# allow letters, digits and "_.:-" only.
locals {
  any_passing = anytrue([for s in values(var.services) : s.status == "passing"])
  servers = [
    for key in sort(keys(var.services)) : {
      name    = replace(var.services[key].id, "/[^A-Za-z0-9_.:-]/", "_")
      address = var.services[key].address
      port    = var.services[key].port
      weight  = var.services[key].status == "passing" || !local.any_passing ? 100 : 0
    } if contains(["passing", "warning"], var.services[key].status)
  ]
}

output "backend" {
  description = "The HAProxy backend section"
  value = templatefile("${path.module}/backend.cfg.tftpl", {
    name    = var.backend_name
    servers = local.servers
  })
}

output "servers" {
  description = "The servers of the backend: name, address, port, weight"
  value       = local.servers
}
