# AKS with local accounts: the client certificate of the cluster's admin
# credentials. With Entra ID (AAD) integration use an exec block with
# kubelogin instead:
#   exec {
#     api_version = "client.authentication.k8s.io/v1beta1"
#     command     = "kubelogin"
#     args        = ["get-token", "--login", "azurecli", "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"]
#   }
provider "k8s" {
  alias                  = "aks"
  host                   = azurerm_kubernetes_cluster.this.kube_admin_config[0].host
  cluster_ca_certificate = base64decode(azurerm_kubernetes_cluster.this.kube_admin_config[0].cluster_ca_certificate)
  client_certificate     = base64decode(azurerm_kubernetes_cluster.this.kube_admin_config[0].client_certificate)
  client_key             = base64decode(azurerm_kubernetes_cluster.this.kube_admin_config[0].client_key)
}
