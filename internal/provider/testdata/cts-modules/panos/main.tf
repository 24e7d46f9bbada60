variable "services" {
  type = map(object({
    id                    = string
    name                  = string
    address               = string
    port                  = number
    status                = string
    meta                  = map(string)
    tags                  = list(string)
    namespace             = string
    node                  = string
    node_id               = string
    node_address          = string
    node_datacenter       = string
    node_tagged_addresses = map(string)
    node_meta             = map(string)
  }))
}

output "tag_to_ips" {
  value = {
    for name in distinct([for s in values(var.services) : s.name]) : name => [
      for s in values(var.services) : s.address == "" ? s.node_address : s.address if s.name == name
    ]
  }
}
