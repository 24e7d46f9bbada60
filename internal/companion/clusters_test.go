package companion

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAClusterFlagSaysHowToConnect(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		flag, key, kubeconfig, context, err string
	}{
		{flag: "east=east-admin", key: "east", context: "east-admin"},
		{flag: "east=/etc/k8s/east.yaml", key: "east", kubeconfig: "/etc/k8s/east.yaml"},
		{flag: "east=config", key: "east", kubeconfig: "config"},
		{flag: "east=/etc/k8s/all.yaml#east", key: "east", kubeconfig: "/etc/k8s/all.yaml", context: "east"},
		{flag: "default=blue", key: "", context: "blue"},
		{flag: "by_region[eu]=eu", key: `by_region["eu"]`, context: "eu"},
		{flag: `by_region["eu"]=eu`, key: `by_region["eu"]`, context: "eu"},
		{flag: "east", err: "give ALIAS=CONTEXT"},
		{flag: "=ctx", err: "give ALIAS=CONTEXT"},
		{flag: "no good=ctx", err: "is not a provider alias"},
		{flag: "by_region[=ctx", err: "ALIAS[KEY]"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			key, c, err := parseClusterFlag(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if key != tc.key || c.kubeconfig != tc.kubeconfig || c.context != tc.context {
				t.Errorf("key %q, kubeconfig %q, context %q; want %q, %q, %q", key, c.kubeconfig, c.context, tc.key, tc.kubeconfig, tc.context)
			}
		})
	}
}

func TestProviderBlocksSayHowToConnectWhenTheirArgumentsHaveValues(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"main.tf": `
variable "kubeconfig" {
  default = "~/.kube/config"
}
variable "green_context" {}
variable "from_env" {}
variable "clusters" {
  type = map(object({ kubeconfig = string, context = string }))
}
variable "unset" {}
provider "k8s" {}
provider "k8s" {
  alias                  = "blue"
  kubeconfig             = var.kubeconfig
  context                = "blue"
  trusted_slice_managers = ["mesh.example.com"]
}
provider "k8s" {
  alias      = "green"
  kubeconfig = "${path.module}/green.yaml"
  context    = var.green_context
}
provider "k8s" {
  alias   = "env"
  context = var.from_env
}
provider "k8s" {
  alias    = "region"
  for_each = var.clusters
  kubeconfig = each.value.kubeconfig
  context    = each.value.context
}
provider "k8s" {
  alias = "token"
  host  = "https://10.0.0.1"
  token = "x"
}
provider "k8s" {
  alias   = "unknown"
  context = var.unset
}
provider "k8s" {
  alias = "plugin"
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = "aws"
  }
}
`,
		"terraform.tfvars":     `green_context = "green-admin"`,
		"clusters.auto.tfvars": `clusters = { eu = { kubeconfig = "/k/eu", context = "eu" }, us = { kubeconfig = "/k/us", context = "us" } }`,
	})
	t.Setenv("TF_VAR_from_env", "env-admin")
	found, failed, err := providerConnections(dir)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	for key, want := range map[string]connection{
		"":             {},
		"blue":         {kubeconfig: "~/.kube/config", context: "blue"},
		"green":        {kubeconfig: abs + "/green.yaml", context: "green-admin"},
		"env":          {context: "env-admin"},
		`region["eu"]`: {kubeconfig: "/k/eu", context: "eu"},
		`region["us"]`: {kubeconfig: "/k/us", context: "us"},
	} {
		got, ok := found[key]
		if !ok || got.kubeconfig != want.kubeconfig || got.context != want.context {
			t.Errorf("%s: %+v (%v), want %+v", clusterName(key), got, ok, want)
		}
	}
	for key, want := range map[string]string{
		"token":   "it sets host",
		"unknown": "its context is not a constant or a variable with a value",
		"plugin":  "its exec block connects in a way",
	} {
		if err := failed[key]; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "-cluster "+key+"=") {
			t.Errorf("%s: error %v, want one with %q naming the flag", clusterName(key), err, want)
		}
	}
}
