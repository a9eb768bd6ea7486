// Command crdmerge merges the CRDs generated from hack/kuberay17 (the fields KubeRay v1.7 added) into
// the ones generated from KubeRay's ray-operator module, file by file and version by version:
//
//	go run ./hack/crdmerge -additions DIR -into DIR (controller-gen's output, rewritten in place)
//
// A property the target lacks is added whole; one it has is merged recursively. A property an addition
// declares but does not require stops being required (v1.7 made gcsFaultToleranceOptions.redisAddress
// optional); enums, defaults and CEL validations an addition declares are taken; printer columns an
// addition declares replace the target's. Every addition must find its target, or the merge fails.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/rayctl/rayctl/hack/crdfile"
)

func main() {
	additions := flag.String("additions", "", "directory of the CRDs generated from hack/kuberay17")
	into := flag.String("into", "", "directory of the CRDs to merge them into (rewritten in place)")
	flag.Parse()
	if *additions == "" || *into == "" {
		fmt.Fprintln(os.Stderr, "usage: crdmerge -additions DIR -into DIR")
		os.Exit(2)
	}
	if err := mergeDir(*additions, *into); err != nil {
		fmt.Fprintln(os.Stderr, "crdmerge:", err)
		os.Exit(1)
	}
}

func mergeDir(additions, into string) error {
	files, err := filepath.Glob(filepath.Join(additions, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", additions)
	}
	for _, f := range files {
		target := filepath.Join(into, filepath.Base(f))
		add, err := crdfile.Read(f)
		if err != nil {
			return err
		}
		crd, err := crdfile.Read(target)
		if err != nil {
			return fmt.Errorf("%s has no target: %w", filepath.Base(f), err)
		}
		if err := mergeCRD(crd, add); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		if err := crdfile.Write(target, crd); err != nil {
			return err
		}
	}
	return nil
}

// mergeCRD merges every version of add into the version of crd with the same name.
func mergeCRD(crd, add *apiextensionsv1.CustomResourceDefinition) error {
	for _, av := range add.Spec.Versions {
		i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == av.Name })
		if i < 0 {
			return fmt.Errorf("version %s not in the target", av.Name)
		}
		v := &crd.Spec.Versions[i]
		if av.Schema == nil || av.Schema.OpenAPIV3Schema == nil || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("version %s has no schema", av.Name)
		}
		mergeSchema(v.Schema.OpenAPIV3Schema, av.Schema.OpenAPIV3Schema)
		if len(av.AdditionalPrinterColumns) > 0 {
			v.AdditionalPrinterColumns = av.AdditionalPrinterColumns
		}
	}
	return nil
}

// mergeSchema merges add into dst (see the package comment for the rules).
func mergeSchema(dst, add *apiextensionsv1.JSONSchemaProps) {
	for name, p := range add.Properties {
		if dst.Properties == nil {
			dst.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		if have, ok := dst.Properties[name]; ok {
			mergeSchema(&have, &p)
			dst.Properties[name] = have
		} else {
			dst.Properties[name] = p
		}
	}
	if add.Items != nil && add.Items.Schema != nil && dst.Items != nil && dst.Items.Schema != nil {
		mergeSchema(dst.Items.Schema, add.Items.Schema)
	}
	required := dst.Required[:0:0]
	for _, r := range dst.Required {
		if _, declared := add.Properties[r]; declared && !slices.Contains(add.Required, r) {
			continue
		}
		required = append(required, r)
	}
	for _, r := range add.Required {
		if !slices.Contains(required, r) {
			required = append(required, r)
		}
	}
	dst.Required = required
	if len(add.Enum) > 0 {
		dst.Enum = add.Enum
	}
	if add.Default != nil {
		dst.Default = add.Default
	}
	for _, rule := range add.XValidations {
		if !slices.ContainsFunc(dst.XValidations, func(r apiextensionsv1.ValidationRule) bool { return r.Rule == rule.Rule }) {
			dst.XValidations = append(dst.XValidations, rule)
		}
	}
}
