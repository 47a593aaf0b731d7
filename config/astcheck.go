package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gelo-research/geloattack/data/gelo"
)

var rangeType = reflect.TypeOf(gelo.Range{})

// checkNodes walks the document beside the Run struct before it is decoded and reports, with the
// key's line and column, what the decoder would accept silently or without a location: a
// fraction or a string in an integer field (the decoder truncates 2.9 to 2 and reads '10' as
// 10), a null where a value is needed, and a malformed range (its errors carry no position).
func checkNodes(name string, src []byte) error {
	f, err := parser.ParseBytes(src, 0)
	if err != nil || len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil // the decoder reports syntax errors with their position
	}
	if err := CheckKeys("config", name, src); err != nil {
		return err
	}
	return walkNode(name, f.Docs[0].Body, reflect.TypeOf(Run{}), "")
}

// CheckKeys refuses a mapping key that is not a plain string (0:, true:, null:, a list): the
// decoder drops a document with one silently, leaving every default in place, and a sweep would
// fail later on it. kind names the file's kind in the error ("config", "sweep").
func CheckKeys(kind, name string, src []byte) error {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil // the decoder reports syntax errors with their position
	}
	var bad *Error
	for _, d := range f.Docs {
		ast.Walk(keyVisitor(func(kv *ast.MappingValueNode) bool {
			if bad != nil {
				return false
			}
			switch k := kv.Key.(type) {
			case *ast.StringNode:
				return true
			case *ast.MappingKeyNode:
				if _, ok := k.Value.(*ast.StringNode); ok {
					return true
				}
			}
			pos := kv.Key.GetToken().Position
			bad = &Error{Kind: kind, File: name, Line: pos.Line, Col: pos.Column, Key: strings.TrimSpace(kv.Key.String()),
				Msg: "a key must be a name (a string), not a number, boolean, null or collection"}
			return false
		}), d)
	}
	if bad != nil {
		return bad
	}
	return checkNoAliases(kind, name, src, f)
}

// checkNoAliases refuses YAML anchors and aliases (&a, *a): a run config or sweep file is short
// enough to write out, an alias in a typed field would otherwise be read as the text "*a", and a
// nest of aliases expands exponentially.
func checkNoAliases(kind, name string, src []byte, f *ast.File) error {
	var bad *Error
	for _, d := range f.Docs {
		ast.Walk(nodeVisitor(func(n ast.Node) bool {
			if bad != nil {
				return false
			}
			switch n.(type) {
			case *ast.AnchorNode, *ast.AliasNode:
				pos := n.GetToken().Position
				bad = &Error{Kind: kind, File: name, Line: pos.Line, Col: pos.Column, Key: pathAtLine(src, pos.Line),
					Msg: "YAML anchors and aliases (&name, *name) are not supported; write the value out"}
				return false
			}
			return true
		}), d)
	}
	if bad != nil {
		return bad
	}
	return nil
}

// nodeVisitor calls its function on every node of a document; false skips the node's children.
type nodeVisitor func(ast.Node) bool

// Visit implements ast.Visitor.
func (v nodeVisitor) Visit(n ast.Node) ast.Visitor {
	if !v(n) {
		return nil
	}
	return v
}

// keyVisitor calls its function on every key/value pair of a document.
type keyVisitor func(*ast.MappingValueNode) bool

// Visit implements ast.Visitor.
func (v keyVisitor) Visit(n ast.Node) ast.Visitor {
	if kv, ok := n.(*ast.MappingValueNode); ok && !v(kv) {
		return nil
	}
	return v
}

// pairs lists the key/value pairs of a mapping node (go-yaml gives a one-pair mapping as the pair).
func pairs(n ast.Node) []*ast.MappingValueNode {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}
	}
	return nil
}

func walkNode(name string, n ast.Node, t reflect.Type, prefix string) error {
	for _, kv := range pairs(n) {
		key := kv.Key.GetToken().Value
		field, ok := fieldByYAML(t, key)
		if !ok {
			continue // unknown keys are the decoder's to report
		}
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		v := kv.Value
		pos := v.GetToken().Position
		fail := func(format string, args ...any) error {
			return &Error{File: name, Line: pos.Line, Col: pos.Column, Key: path, Msg: fmt.Sprintf(format, args...)}
		}
		if _, null := v.(*ast.NullNode); null {
			return fail("no value; remove the key to keep the default")
		}
		switch ft := field.Type; {
		case ft == rangeType:
			var r gelo.Range
			if err := yaml.Unmarshal([]byte(v.String()), &r); err != nil {
				return fail("%s (a range is a number, [min, max], or {min, max, rand})", strings.TrimSpace(yaml.FormatError(err, false, false)))
			}
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
			if _, isInt := v.(*ast.IntegerNode); !isInt {
				return fail("%s, want an integer", strings.TrimSpace(v.String()))
			}
		case ft.Kind() == reflect.Struct:
			if err := walkNode(name, v, ft, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByYAML finds the struct field whose YAML key is key.
func fieldByYAML(t reflect.Type, key string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		if yamlName(t.Field(i)) == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// pathAtLine is the dotted path of the deepest key on a line of the document ("train.lr"), or "".
func pathAtLine(src []byte, line int) string {
	f, err := parser.ParseBytes(src, 0)
	if err != nil || len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return ""
	}
	var find func(n ast.Node, prefix string) string
	find = func(n ast.Node, prefix string) string {
		found := ""
		for _, kv := range pairs(n) {
			p := kv.Key.GetToken().Value
			if prefix != "" {
				p = prefix + "." + p
			}
			if kv.Key.GetToken().Position.Line == line {
				found = p
			}
			if deeper := find(kv.Value, p); deeper != "" {
				found = deeper
			}
		}
		return found
	}
	return find(f.Docs[0].Body, "")
}
