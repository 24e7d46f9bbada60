package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/helpers/validatordiag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"k8s.io/apimachinery/pkg/util/validation"
)

// dns1123Label checks a name as Kubernetes does for namespaces, Services and
// Service port names, so that a bad name fails at validate time rather than
// as a confusing API error.
type dns1123Label struct{}

var _ validator.String = dns1123Label{}

func (dns1123Label) Description(context.Context) string {
	return "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
}

func (v dns1123Label) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v dns1123Label) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	value := req.ConfigValue.ValueString()
	problems := validation.IsDNS1123Label(value)
	if value == "" {
		problems = []string{"it is empty"}
	}
	if len(problems) > 0 {
		resp.Diagnostics.Append(validatordiag.InvalidAttributeValueDiagnostic(
			req.Path, v.Description(ctx)+" ("+strings.Join(problems, "; ")+")", `"`+value+`"`))
	}
}

// qualifiedName checks an annotation name as Kubernetes does: an optional
// DNS subdomain prefix and a slash, then a name of at most 63 characters.
type qualifiedName struct{}

var _ validator.String = qualifiedName{}

func (qualifiedName) Description(context.Context) string {
	return "must be a Kubernetes annotation name, such as `example.com/expires`"
}

func (v qualifiedName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v qualifiedName) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	value := req.ConfigValue.ValueString()
	if problems := validation.IsQualifiedName(value); len(problems) > 0 {
		resp.Diagnostics.Append(validatordiag.InvalidAttributeValueDiagnostic(
			req.Path, v.Description(ctx)+" ("+strings.Join(problems, "; ")+")", `"`+value+`"`))
	}
}

// enumStrings and enumList keep schema text and validators on one list.
func enumStrings[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

func enumList[T ~string](values []T) string {
	return "`" + strings.Join(enumStrings(values), "`, `") + "`"
}
