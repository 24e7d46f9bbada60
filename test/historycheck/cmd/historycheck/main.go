// Command historycheck refuses history in the files users read (package
// historycheck): it prints each line refused as file:line and exits 1.
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
		os.Exit(1)
	}
}
