variable "services" {
  type = map(object({
    id                    = string
    name                  = string
    kind                  = string
    address               = string
    port                  = number
    meta                  = map(string)
    tags                  = list(string)
    namespace             = string
    status                = string
    node                  = string
    node_id               = string
    node_address          = string
    node_datacenter       = string
    node_tagged_addresses = map(string)
    node_meta             = map(string)
    cts_user_defined_meta = map(string)
  }))
}

output "address_groups" {
  value = {
    for name in distinct([for s in values(var.services) : s.name]) : name => {
      for s in values(var.services) : s.id => "${s.address} 255.255.255.255" if s.name == name
    }
  }
}
