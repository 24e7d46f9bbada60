// Command companion-reference writes the reference of the companion's flags
// and metrics (companion.Reference, generated from its flag sets and its
// metrics registry) into its tfplugindocs template; `make docs` runs it
// from the repository's root, before tfplugindocs.
package main

import (
	"fmt"
	"os"

	"github.com/vigie/terraform-provider-k8s/internal/companion"
)

func main() {
	text, err := companion.Reference()
	if err != nil {
		fmt.Fprintln(os.Stderr, "companion-reference:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(companion.ReferenceTemplate, []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "companion-reference:", err)
		os.Exit(1)
	}
}
