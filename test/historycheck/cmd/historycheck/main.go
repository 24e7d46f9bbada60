// Command historycheck refuses history in the files users read (package
// historycheck), and a registry host named in any file of the repository:
// it prints each line refused as file:line and exits 1.
// Usage: historycheck [root], the repository's root (default ".").
package main

import (
	"fmt"
	"os"

	"github.com/vigie/terraform-provider-k8s/test/historycheck"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	failed := false
	paths, err := historycheck.Paths(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "historycheck:", err)
		os.Exit(1)
	}
	found, err := historycheck.Check(root, paths)
	if err != nil {
		fmt.Fprintln(os.Stderr, "historycheck:", err)
		os.Exit(1)
	}
	for _, f := range found {
		fmt.Println(f)
	}
	if len(found) > 0 {
		fmt.Fprintf(os.Stderr, "historycheck: %d lines of user docs carry history (commit ids, issue numbers, dates, \"no longer\"): say what is, not what changed; figures go in bench/\n", len(found))
		failed = true
	}

	files, err := historycheck.RepositoryFiles(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "historycheck:", err)
		os.Exit(1)
	}
	hosts, err := historycheck.RegistryHosts(root, files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "historycheck:", err)
		os.Exit(1)
	}
	for _, f := range hosts {
		fmt.Println(f)
	}
	if len(hosts) > 0 {
		fmt.Fprintf(os.Stderr, "historycheck: %d lines of the repository name a registry host: ask the CLI for it (scripts/registry-host.sh), use a made-up host in tests (mirror.test), elide it in docs (<host>/hashicorp/aws)\n", len(hosts))
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}
