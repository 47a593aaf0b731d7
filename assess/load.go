package assess

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/gelo-research/geloattack/config"
	"github.com/gelo-research/geloattack/internal/field"
)

// errKind names deployment files in errors ("deployment FILE:LINE:COL: key: message").
const errKind = "deployment"

// LoadDeployment reads a deployment file over DefaultDeployment; see ParseDeployment. It is read
// through config.ReadFile (internal/safefile's door, kind Config: a file or a pipe, at most
// 4 MiB, text only), as run configs are.
func LoadDeployment(path string) (Deployment, error) {
	src, err := config.ReadFile(errKind, path)
	if err != nil {
		return Deployment{}, err
	}
	if err := config.CheckNotEmpty(path, src); err != nil {
		return Deployment{}, err
	}
	return ParseDeployment(path, src)
}

// ParseDeployment decodes src (named name in errors) over DefaultDeployment, strictly, and
// validates it: an unknown key, a fraction or a string in an integer field, a null, an alias, a
// second document and a value out of its range are refused as a *config.Error of kind
// "deployment" with the file, line, column and key. The model is not required here (the -model
// flag may give it); Resolve requires it.
func ParseDeployment(name string, src []byte) (Deployment, error) {
	d := DefaultDeployment()
	if err := config.CheckText(errKind, name, src); err != nil {
		return d, err
	}
	if err := config.CheckKeys(errKind, name, src); err != nil {
		return d, err
	}
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return d, decodeError(name, err)
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			pos := doc.Body.GetToken().Position
			return d, &config.Error{Kind: errKind, File: name, Line: pos.Line, Col: pos.Column, Msg: "more than one YAML document (---); a deployment is one document"}
		}
		body = doc.Body
	}
	if body == nil {
		return d, nil
	}
	if err := walk(name, body, reflect.TypeOf(Deployment{}), ""); err != nil {
		return d, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(src), yaml.Strict(), yaml.DisallowUnknownField())
	if err := dec.Decode(&d); err != nil {
		return d, decodeError(name, err)
	}
	if err := d.Validate(); err != nil {
		return d, Locate(name, src, err)
	}
	return d, nil
}

// decodeError turns a go-yaml error into a *config.Error at its token's line and column.
func decodeError(name string, err error) error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
		return &config.Error{Kind: errKind, File: name, Msg: msg}
	}
	pos := ye.GetToken().Position
	return &config.Error{Kind: errKind, File: name, Line: pos.Line, Col: pos.Column, Msg: ye.GetMessage()}
}

// walk checks the document against the struct type t before it is decoded, for what the decoder
// would accept silently: a null (it leaves the default), a fraction or a string in an integer
// field (2.9 would become 2), and a list where one value is wanted or the reverse. Unknown keys
// are the decoder's to refuse.
func walk(name string, n ast.Node, t reflect.Type, prefix string) error {
	var pairs []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		pairs = m.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{m}
	default:
		pos := n.GetToken().Position
		what := "the document"
		if prefix != "" {
			what = prefix
		}
		return &config.Error{Kind: errKind, File: name, Line: pos.Line, Col: pos.Column, Key: prefix,
			Msg: fmt.Sprintf("%s is a mapping of keys, not %s", what, strings.TrimSpace(n.String()))}
	}
	for _, kv := range pairs {
		key := kv.Key.GetToken().Value
		sf, ok := fieldOf(t, key)
		if !ok {
			continue
		}
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		if err := checkValue(name, kv.Value, sf.Type, path); err != nil {
			return err
		}
	}
	return nil
}

// checkValue checks one value node against the Go type it decodes into.
func checkValue(name string, v ast.Node, t reflect.Type, path string) error {
	pos := v.GetToken().Position
	fail := func(format string, args ...any) error {
		return &config.Error{Kind: errKind, File: name, Line: pos.Line, Col: pos.Column, Key: path, Msg: fmt.Sprintf(format, args...)}
	}
	if _, null := v.(*ast.NullNode); null {
		return fail("no value; remove the key to keep the default")
	}
	switch k := t.Kind(); {
	case k == reflect.Struct:
		return walk(name, v, t, path)
	case k == reflect.Slice:
		seq, ok := v.(*ast.SequenceNode)
		if !ok {
			return fail("%s, want a list ([a, b, ...])", strings.TrimSpace(v.String()))
		}
		for i, e := range seq.Values {
			if err := checkValue(name, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case k >= reflect.Int && k <= reflect.Uint64:
		if _, ok := v.(*ast.IntegerNode); !ok {
			return fail("%s, want an integer", strings.TrimSpace(v.String()))
		}
	case k == reflect.Float64:
		switch v.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
		default:
			return fail("%s, want a number", strings.TrimSpace(v.String()))
		}
	case k == reflect.Bool:
		if _, ok := v.(*ast.BoolNode); !ok {
			return fail("%s, want true or false", strings.TrimSpace(v.String()))
		}
	case k == reflect.String:
		switch v.(type) {
		case *ast.StringNode, *ast.LiteralNode:
		default:
			return fail("%s, want a string", strings.TrimSpace(v.String()))
		}
	}
	return nil
}

// fieldOf finds the struct field whose YAML key is key.
func fieldOf(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// Locate turns a validation error (a *field.Error, or several joined) into a *config.Error at the
// line of the first one's key in src, or of the nearest enclosing key the file sets (a default
// or a flag's value may be what is wrong, and then the file has no line for it).
func Locate(name string, src []byte, err error) error {
	var fe *field.Error
	if !errors.As(err, &fe) {
		return &config.Error{Kind: errKind, File: name, Msg: err.Error()}
	}
	e := &config.Error{Kind: errKind, File: name, Key: fe.Path, Msg: fe.Msg}
	if n := countErrors(err); n > 1 {
		e.Msg += fmt.Sprintf(" (and %d more)", n-1)
	}
	f, perr := parser.ParseBytes(src, 0)
	if perr != nil {
		return e
	}
	for p := fe.Path; p != "" && e.Line == 0; {
		if yp, err := yaml.PathString("$." + p); err == nil {
			if n, err := yp.FilterFile(f); err == nil && n != nil && n.GetToken() != nil {
				e.Line, e.Col = n.GetToken().Position.Line, n.GetToken().Position.Column
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return e
}

// countErrors counts the errors joined in err (1 for a plain one).
func countErrors(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// Marshal renders the deployment as YAML: the resolved form saved as deployment.yaml, which
// resume and merge compare byte for byte.
func (d Deployment) Marshal() ([]byte, error) {
	b, err := yaml.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("assess: deployment: %w", err)
	}
	return b, nil
}
