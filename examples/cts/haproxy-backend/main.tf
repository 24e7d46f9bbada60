# A small module written the way CTS modules are: it only reads var.services.
# It renders an HAProxy backend: passing instances take traffic, warning ones
# (draining pods) keep their connections with weight 0, critical ones are left
# out. HAProxy server names allow letters, digits and "_.:-" only.
locals {
  servers = [
    for key in sort(keys(var.services)) : {
      name    = replace(var.services[key].id, "/[^A-Za-z0-9_.:-]/", "_")
      address = var.services[key].address
      port    = var.services[key].port
      weight  = var.services[key].status == "passing" ? 100 : 0
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
