// Command crdcopy copies CRD manifests (the Gateway API's, published in its Go module under
// config/crd/standard; the Ray CRDs controller-gen wrote) into configs/crds as JSON (NAME.yaml becomes
// NAME.json: see hack/crdfile) without their schema descriptions, as controller-gen's crd:maxDescLen=0
// does for the Ray CRDs: the API server keeps every schema in memory, and the descriptions are most of it.
//
//	go run ./hack/crdcopy -from DIR -into configs/crds NAME.yaml...
//
// Everything else (versions, validations and CEL rules, defaults, printer columns, annotations naming the
// bundle version) is kept as published.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/rayctl/rayctl/hack/crdfile"
)

func main() {
	from := flag.String("from", "", "directory holding the published CRDs")
	into := flag.String("into", "", "directory to write them to")
	flag.Parse()
	if *from == "" || *into == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: crdcopy -from DIR -into DIR NAME.yaml...")
		os.Exit(2)
	}
	for _, name := range flag.Args() {
		target := filepath.Join(*into, strings.TrimSuffix(name, filepath.Ext(name))+".json")
		if err := copyCRD(filepath.Join(*from, name), target); err != nil {
			fmt.Fprintln(os.Stderr, "crdcopy:", err)
			os.Exit(1)
		}
	}
}

// copyCRD reads one CRD, drops its schemas' descriptions and writes it to target.
func copyCRD(source, target string) error {
	crd, err := crdfile.Read(source)
	if err != nil {
		return err
	}
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i].Schema; v != nil && v.OpenAPIV3Schema != nil {
			dropDescriptions(v.OpenAPIV3Schema)
		}
	}
	return crdfile.Write(target, crd)
}

// dropDescriptions clears s's description and those of every schema inside it.
func dropDescriptions(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Description = ""
	for _, m := range []map[string]apiextensionsv1.JSONSchemaProps{s.Properties, s.PatternProperties, s.Definitions} {
		for k, p := range m {
			dropDescriptions(&p)
			m[k] = p
		}
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.OneOf, s.AnyOf} {
		for i := range list {
			dropDescriptions(&list[i])
		}
	}
	dropDescriptions(s.Not)
	if s.Items != nil {
		dropDescriptions(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			dropDescriptions(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		dropDescriptions(s.AdditionalProperties.Schema)
	}
	if s.AdditionalItems != nil {
		dropDescriptions(s.AdditionalItems.Schema)
	}
	for k, d := range s.Dependencies {
		dropDescriptions(d.Schema)
		s.Dependencies[k] = d
	}
}
