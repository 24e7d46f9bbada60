// The process of a pod with a real network (test/testcluster/podnet.go):
// an HTTP server run inside the pod's network namespace, and the keeper that
// removes the namespaces when the test process dies. A module of its own,
// standard library only, so that `go install ./...` of the provider never
// installs it and its build takes seconds.
module github.com/vigie/terraform-provider-k8s/tools/podserver

go 1.26.0
