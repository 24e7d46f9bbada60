package binsize

import "testing"

func TestASymbolBelongsToThePackageOfItsNameOrType(t *testing.T) {
	for _, tt := range []struct{ symbol, pkg string }{
		{"k8s.io/api/core/v1.(*PodSpec).Unmarshal", "k8s.io/api/core/v1"},
		{"type:.eq.k8s.io/api/core/v1.ServicePort", "k8s.io/api/core/v1"},
		{"go:itab.*k8s.io/client-go/rest.Request,io.Reader", "k8s.io/client-go/rest"},
		{"slices.SortFunc[[]string,string]", "slices"},
		{"go:string.*", runtimeMetadata},
		{"runtime.gcbits·1", runtimeMetadata},
		{"main", runtimeMetadata},
	} {
		if got := symbolPackage(tt.symbol); got != tt.pkg {
			t.Errorf("symbolPackage(%q) = %q, want %q", tt.symbol, got, tt.pkg)
		}
	}
}

func TestAPackageBelongsToTheLongestModuleThatHoldsIt(t *testing.T) {
	modules := []string{"k8s.io/client-go/tools", "k8s.io/client-go", "github.com/vigie/terraform-provider-k8s"}
	for _, tt := range []struct{ pkg, module string }{
		{"k8s.io/client-go/tools/cache", "k8s.io/client-go/tools"},
		{"k8s.io/client-go/rest", "k8s.io/client-go"},
		{"github.com/vigie/terraform-provider-k8s/internal/kube", "github.com/vigie/terraform-provider-k8s"},
		{"net/http", "std"},
		{"example.com/other", "(unknown module) example.com/other"},
		{runtimeMetadata, runtimeMetadata},
	} {
		if got := moduleOf(tt.pkg, modules); got != tt.module {
			t.Errorf("moduleOf(%q) = %q, want %q", tt.pkg, got, tt.module)
		}
	}
}
