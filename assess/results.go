package assess

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"

	"github.com/gelo-research/geloattack/internal/safefile"
)

// Row is one line of results.jsonl: one prompt under one attack at one setting. The file holds
// only what a rerun reproduces bit for bit (no wall time: that is timing.jsonl's), so a resumed,
// sharded or merged assessment writes the same bytes as one run.
type Row struct {
	// Setting is the setting, in full.
	Setting Setting `json:"setting"`
	// Attack is the attack's name.
	Attack string `json:"attack"`
	// Batch is the batch's number; Pos the prompt's place in it; Prompt its place in the
	// assessment; TextID its id in the source. A content victim's row: Batch its unit's number
	// among the setting's victims, Pos 0, Prompt its number in its template, TextID
	// gelo.VictimTextID.
	Batch  int   `json:"batch"`
	Pos    int   `json:"pos"`
	Prompt int   `json:"prompt"`
	TextID int64 `json:"text_id"`
	// Tokens are the true text's token ids; Text their text (special tokens left out).
	Tokens []int  `json:"tokens"`
	Text   string `json:"text"`
	// D and P are the model's hidden and Q/K/V widths (for the cost).
	D int `json:"d"`
	P int `json:"p"`
	// Success is the attack's verdict measure for this prompt (decode: read back exactly;
	// presence: its decoy proven absent and the prompt not excluded).
	Success bool `json:"success"`
	// Claimed is the attack's right claim about this prompt (decode: a claimed, that is proven,
	// decoded text equals it; presence: its decoy proven absent).
	Claimed bool `json:"claimed"`
	// WrongClaims are claims of this batch that are wrong, attributed to this prompt (decode: a
	// claimed text equal to no true text, attributed to the true text it matches best; presence:
	// this prompt, which is in the batch, excluded).
	WrongClaims int `json:"wrong_claims"`
	// TokenAcc is decode's best positionwise accuracy of a decoded text against this prompt.
	TokenAcc float64 `json:"token_acc"`
	// Decoded is the decoded text closest to this prompt (decode), DecodedText its text and
	// DecodedClaimed whether it was claimed.
	Decoded        []int  `json:"decoded,omitempty"`
	DecodedText    string `json:"decoded_text,omitempty"`
	DecodedClaimed bool   `json:"decoded_claimed,omitempty"`
	// BagRecall is the fraction of this prompt's distinct tokens in decode's certified bag.
	BagRecall *float64 `json:"bag_recall,omitempty"`
	// DecoyID is presence's decoy: a text absent from the batch, scored beside this prompt.
	DecoyID *int64 `json:"decoy_id,omitempty"`
	// CannotTell says the attack made no claim either way about this prompt (presence: neither
	// the prompt nor its decoy was proven absent).
	CannotTell bool `json:"cannot_tell,omitempty"`
	// PromptExcess and DecoyExcess are presence's evidence: the largest ratio, over the text's
	// rows and the scored blocks, of a row's statistic to the bound every row of X meets (above
	// 1: proven absent), rounded to 3 decimals.
	PromptExcess *float64 `json:"prompt_excess,omitempty"`
	DecoyExcess  *float64 `json:"decoy_excess,omitempty"`
	// Candidates and Rank are a ranking attack's (learned: the texts it ranked for this prompt,
	// the prompt and the batch's decoys, and the prompt's place among them, 1: first, a tie
	// counting against it; content: the candidates and the secret's place). 1/Candidates is a
	// uniform guess's chance of success.
	Candidates int `json:"candidates,omitempty"`
	Rank       int `json:"prompt_rank,omitempty"`
	// Template, Secret and SecretAbsent are content recovery's victim (a row of its own, its
	// filled template in Tokens and Text): the template's name, the secret (-redact hides it in
	// the reports, with the text) and, for a look-alike whose secret is not among the
	// candidates, how (AbsentLonger, AbsentNeighbour; "" when it is among them).
	Template     string `json:"template,omitempty"`
	Secret       string `json:"secret,omitempty"`
	SecretAbsent string `json:"secret_absent,omitempty"`
	// Verdicts and Guesses are, per scored block, content's verdict on the victim (claim, not
	// among the candidates, ranked first, not claimed) and the candidate it ranks first;
	// SecretRanks the secret's rank there (1: first, ties broken at random; a secret among the
	// candidates only). Candidates are the candidates scored (the secret removed for
	// AbsentNeighbour) and Rank the deepest block's SecretRanks.
	Verdicts    []string `json:"verdicts,omitempty"`
	Guesses     []string `json:"guesses,omitempty"`
	SecretRanks []int    `json:"secret_ranks,omitempty"`
	// Stats are the batch's figures, the same on every row of the batch.
	Stats BatchStats `json:"batch_stats"`
}

// BatchStats are one batch's figures.
type BatchStats struct {
	// Texts are the batch's prompts; Clean its rows (tokens), Shields the shield rows, Observed
	// the rows the accelerator saw at block 0.
	Texts    int `json:"texts"`
	Clean    int `json:"clean_rows"`
	Shields  int `json:"shield_rows"`
	Observed int `json:"observed_rows"`
	// Blocks are the scored blocks and Rank the numerical rank of each one's U.
	Blocks []int `json:"blocks"`
	Rank   []int `json:"rank"`
	// BagSize, BagPrecision, BagRecall and BagMargin are decode's certified bag (its size,
	// precision and recall against the batch's distinct tokens) and its margin in decades
	// (rounded to 0.001; null where infinite).
	BagSize      int      `json:"bag_size,omitempty"`
	BagPrecision *float64 `json:"bag_precision,omitempty"`
	BagRecall    *float64 `json:"bag_recall,omitempty"`
	BagMargin    *float64 `json:"bag_margin,omitempty"`
	// Passes are the candidate forward passes the attack made (decode's candidate extensions,
	// presence's candidate and decoy texts).
	Passes int `json:"candidate_passes"`
	// Claims and ClaimsRight are the batch's claims and right ones (decode's tally; presence's
	// exclusions, of decoys and of prompts);
	// Overclaimed says its claims were withdrawn because U cannot hold them all.
	Claims      int  `json:"claims"`
	ClaimsRight int  `json:"claims_right"`
	Overclaimed bool `json:"overclaimed,omitempty"`
}

// ResultsFile, TimingFile, DeploymentFile, ReportMD, ReportHTML, FrontierSVG and ShardFile are
// the files of an assessment directory.
const (
	ResultsFile    = "results.jsonl"
	TimingFile     = "timing.jsonl"
	DeploymentFile = "deployment.yaml"
	ReportMD       = "report.md"
	ReportHTML     = "report.html"
	FrontierSVG    = "frontier.svg"
	ShardFile      = "shard.txt"
)

// rounded is x rounded to 3 decimals, or nil for an infinite or NaN x.
func rounded(x float64) *float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return nil
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 3, 64), 64)
	return &r
}

// ptr is &x.
func ptr[T any](x T) *T { return &x }

// encodeRows renders rows as JSON lines.
func encodeRows(rows []Row) ([]byte, error) {
	var b bytes.Buffer
	for _, r := range rows {
		line, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("assess: results: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// resultLine is one line of results.jsonl as read back: the row and its bytes (kept, so that a
// merge writes what the shards wrote).
type resultLine struct {
	row  Row
	line []byte
}

// readResults reads results.jsonl; a missing file is no rows. A last line cut short (no newline:
// the process died in its append) is reported in torn, with the offset where it starts, and left
// out; any other line that is not a row is an error naming the file and line.
func readResults(path string) (lines []resultLine, torn int64, err error) {
	b, err := safefile.ReadNoFollow(path, safefile.Metrics)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, -1, fmt.Errorf("assess: %w", err)
	}
	torn = -1
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		torn = int64(i + 1)
		b = b[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), len(b)+1)
	for n := 1; sc.Scan(); n++ {
		var r Row
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, -1, fmt.Errorf("assess: %s:%d: not a result row: %w", path, n, err)
		}
		if r.Attack == "" || r.Setting.Name == "" {
			return nil, -1, fmt.Errorf("assess: %s:%d: a result row without its attack or setting", path, n)
		}
		lines = append(lines, resultLine{row: r, line: append([]byte(nil), sc.Bytes()...)})
	}
	return lines, torn, sc.Err()
}

// ReadRows reads the rows of an assessment directory's results.jsonl (a cut last line left out).
func ReadRows(path string) ([]Row, error) {
	lines, _, err := readResults(path)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(lines))
	for i, l := range lines {
		rows[i] = l.row
	}
	return rows, nil
}
