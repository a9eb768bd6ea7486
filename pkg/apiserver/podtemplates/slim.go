// Package podtemplates serves the PodTemplateSpecs that the ray.io CRDs embed (a RayCluster's head and
// worker templates, a RayJob's cluster and submitter templates, and so on) with a slim schema, and checks
// them in admission against the full one, built once, on the first write that needs it.
//
// A PodTemplateSpec's schema is about 200 kB of the CRD; the four Ray CRDs embed ten of them, 95 % of
// their schemas. apiextensions decodes, converts, validates and stores every CRD on each write, and builds
// structural schemas, validators, OpenAPI documents and server-side-apply models from each on every
// start: that was half of rayctl's start-up CPU and 70 MB of its heap. Served slim, the templates keep
// their fields unchecked by apiextensions (x-kubernetes-preserve-unknown-fields); Admission prunes,
// defaults and validates them as apiextensions did, with the same field paths and messages.
package podtemplates

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// SlimDescription describes a slim template in the served schema (kubectl explain shows it).
const SlimDescription = "A PodTemplateSpec (kubectl explain pod has its fields). Checked by rayctl's admission " +
	"against the full PodTemplateSpec schema; served without its fields to keep the CRD small."

// Slim replaces every PodTemplateSpec in crd's schemas with the slim schema, and returns the paths of
// those it replaced ("spec.workerGroupSpecs[].template"), in the order it met them.
func Slim(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var paths []string
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		walk(v.Schema.OpenAPIV3Schema, "", func(p string, s *apiextensionsv1.JSONSchemaProps) bool {
			if !IsPodTemplateSpec(s) {
				return false
			}
			*s = slimSchema()
			paths = append(paths, strings.TrimPrefix(p, "."))
			return true
		})
	}
	return paths
}

// Find returns the paths and schemas of the PodTemplateSpecs in schema.
func Find(schema *apiextensionsv1.JSONSchemaProps) map[string]*apiextensionsv1.JSONSchemaProps {
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	walk(schema, "", func(p string, s *apiextensionsv1.JSONSchemaProps) bool {
		if IsPodTemplateSpec(s) {
			out[strings.TrimPrefix(p, ".")] = s
			return true
		}
		return false
	})
	return out
}

// IsPodTemplateSpec reports whether s is the schema controller-gen writes for a PodTemplateSpec: an
// object of metadata and spec, the spec holding containers.
func IsPodTemplateSpec(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil || s.Type != "object" || len(s.Properties) != 2 {
		return false
	}
	if _, ok := s.Properties["metadata"]; !ok {
		return false
	}
	spec, ok := s.Properties["spec"]
	if !ok {
		return false
	}
	_, ok = spec.Properties["containers"]
	return ok
}

// slimSchema is what a PodTemplateSpec is served as: metadata and spec, each an object whose fields
// apiextensions keeps as they are.
func slimSchema() apiextensionsv1.JSONSchemaProps {
	open := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: desc, XPreserveUnknownFields: ptrTrue()}
	}
	return apiextensionsv1.JSONSchemaProps{
		Type: "object", Description: SlimDescription,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"metadata": open("The pods' labels and annotations (kubectl explain pod.metadata)."),
			"spec":     open("The pods' spec (kubectl explain pod.spec)."),
		},
	}
}

func ptrTrue() *bool {
	t := true
	return &t
}

// walk calls f on s and, unless f returns true, on each schema under it, with its path: properties by
// name, list items as "[]", map values as "{}".
func walk(s *apiextensionsv1.JSONSchemaProps, path string, f func(string, *apiextensionsv1.JSONSchemaProps) bool) {
	if s == nil || f(path, s) {
		return
	}
	for name, p := range s.Properties {
		walk(&p, path+"."+name, f)
		s.Properties[name] = p
	}
	if s.Items != nil {
		walk(s.Items.Schema, path+"[]", f)
	}
	if s.AdditionalProperties != nil {
		walk(s.AdditionalProperties.Schema, path+"{}", f)
	}
}
