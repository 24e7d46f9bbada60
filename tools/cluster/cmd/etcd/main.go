// Command etcd is a thin wrapper around the upstream etcd server so that the
// local test cluster can be built from Go modules alone (no release tarballs).
// It accepts exactly the flags of the real etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
