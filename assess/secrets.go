package assess

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/gelo-research/geloattack/baselines/content"
	"github.com/gelo-research/geloattack/internal/field"
)

// Secrets are the secret templates content recovery attacks (the deployment's `secrets`
// section): prompts with a secret slot, a PIN, a date or a name, sent in a batch beside other
// prompts. Each template gets Victims victims whose secret is drawn from its candidate set, and
// AbsentVictims whose secret is not among the candidates but looks like one of them.
type Secrets struct {
	// Templates are the templates (empty: content recovery does not run).
	Templates []SecretTemplate `yaml:"templates" json:"templates"`
	// Victims is the number of victims per template whose secret is among the candidates.
	Victims int `yaml:"victims" json:"victims"`
	// AbsentVictims is the number of victims per template whose secret is absent from the
	// candidates but looks alike: alternately one character longer than a candidate (a five-digit
	// number for the four-digit PINs) and a neighbour of the candidates (one of them removed from
	// those scored, its neighbours one edit away left in). Any claim that they hold a candidate is
	// wrong.
	AbsentVictims int `yaml:"absent_victims" json:"absent_victims"`
}

// SecretTemplate is one prompt with a secret slot.
type SecretTemplate struct {
	// Name names the template in the reports and results.jsonl: lower-case letters, digits, '-'
	// and '_'.
	Name string `yaml:"name" json:"name"`
	// Pattern is the prompt with content.Slot ("{x}") once where the secret goes, and text after
	// it: a decoder's rows up to the secret's end are also the rows of every longer secret that
	// starts like it, so only the rows after the slot tell "1603" from "16037".
	Pattern string `yaml:"pattern" json:"pattern"`
	// Set is the candidate set: pin (0000-9999), date (every day of 1925-2024, "March 5, 1987"),
	// name (WordNet's person names, from the corpus directory of scripts/fetch-data.sh).
	Set string `yaml:"set" json:"set"`
	// Candidates, when > 0, keeps a seeded uniform subset of this many candidates of the set
	// (content.Subset with the deployment's seed); the secrets are drawn among those kept.
	Candidates int `yaml:"candidates" json:"candidates"`
}

// The candidate sets of a template.
const (
	SetPIN  = "pin"
	SetDate = "date"
	SetName = "name"
)

// SecretSets are the candidate sets a template may name.
var SecretSets = []string{SetPIN, SetDate, SetName}

// DateYears are the years of the date set, as recover's default -years.
var DateYears = [2]int{1925, 2024}

// DefaultSecretTemplates are the templates of the default deployment: a PIN, with text after its
// slot as a decoder needs.
func DefaultSecretTemplates() []SecretTemplate {
	return []SecretTemplate{{Name: "pin", Pattern: "my PIN is {x}, thanks", Set: SetPIN}}
}

// Absent kinds: how a look-alike victim's secret is not among the candidates.
const (
	// AbsentLonger is a candidate with one more character of its last character's class (a digit
	// after a PIN's digits): a text that starts like a candidate's fill.
	AbsentLonger = "longer"
	// AbsentNeighbour is a candidate drawn as the secret and removed from the candidates scored
	// (content.Options.Absent): a neighbour of those left, one edit from several of them.
	AbsentNeighbour = "neighbour"
)

// templateName is what a template's name may be (it becomes part of a report's attack name).
var templateName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// candidateBounds is the range of secrets.templates[i].candidates.
var candidateBounds = field.Bounds{Int: true, Min: 2, Max: 1 << 24, Zero: "the whole set"}

// validate checks the secrets section: each template's name, pattern (the slot once, text after
// it) and set; the counts are Rules'.
func (s Secrets) validate() []error {
	var errs []error
	for i, t := range s.Templates {
		key := fmt.Sprintf("secrets.templates[%d]", i)
		switch {
		case !templateName.MatchString(t.Name):
			errs = append(errs, field.Errorf(key+".name", "%q, want 1 to 32 lower-case letters, digits, '-' or '_'", t.Name))
		case slices.IndexFunc(s.Templates, func(o SecretTemplate) bool { return o.Name == t.Name }) < i:
			errs = append(errs, field.Errorf(key+".name", "%q is listed twice", t.Name))
		}
		if tp, err := content.ParseTemplate(t.Name, t.Pattern); err != nil {
			errs = append(errs, field.Errorf(key+".pattern", "%v", err))
		} else if err := content.CheckCausalTemplate(tp); err != nil {
			errs = append(errs, field.Errorf(key+".pattern", "%v", err))
		}
		if !slices.Contains(SecretSets, t.Set) {
			errs = append(errs, field.Errorf(key+".set", "%q, want one of %v", t.Set, SecretSets))
		}
		if err := candidateBounds.Check(key+".candidates", float64(t.Candidates)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// template is the template as baselines/content reads it (valid after validate).
func (t SecretTemplate) template() content.Template {
	return content.Template{Name: t.Name, Pattern: t.Pattern}
}

// describeSet is the template's candidate set in words, for the budget.
func (t SecretTemplate) describeSet() string {
	var s string
	switch t.Set {
	case SetPIN:
		s = "the 10,000 four-digit PINs"
	case SetDate:
		s = fmt.Sprintf("every day of %d-%d", DateYears[0], DateYears[1])
	case SetName:
		s = "WordNet's person names"
	default:
		s = t.Set
	}
	if t.Candidates > 0 {
		s = fmt.Sprintf("a seeded subset of %d of %s", t.Candidates, s)
	}
	return s
}

// absentKind is the kind of victim v of a template: "" for the first victims victims (the secret
// among the candidates), then AbsentLonger and AbsentNeighbour alternately.
func absentKind(v, victims int) string {
	switch {
	case v < victims:
		return ""
	case (v-victims)%2 == 0:
		return AbsentLonger
	}
	return AbsentNeighbour
}
