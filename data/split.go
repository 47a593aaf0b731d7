package data

import "fmt"

// Split names one side of the stable train/val partition of texts.
type Split int

const (
	// Train is the side whose texts the attacker trains on.
	Train Split = iota
	// Val is the held-out side.
	Val
)

// String returns "train" or "val".
func (s Split) String() string {
	switch s {
	case Train:
		return "train"
	case Val:
		return "val"
	}
	return fmt.Sprintf("split(%d)", int(s))
}

// ParseSplit parses "train" or "val".
func ParseSplit(s string) (Split, error) {
	switch s {
	case "train":
		return Train, nil
	case "val":
		return Val, nil
	}
	return 0, fmt.Errorf("split %q: want train or val", s)
}

// splitmix64 is a fixed bijective mixer; the split must never change between versions, so it is
// written out here rather than borrowed from a library whose output could change.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// SplitOf assigns a text to Val when the top 53 bits of splitmix64(text_id), read as a fraction in
// [0, 1), fall below valFrac, else to Train. It depends on the text id alone, so a text keeps its
// side across stores, runs and versions.
func SplitOf(textID int64, valFrac float64) Split {
	u := float64(splitmix64(uint64(textID))>>11) / (1 << 53)
	if u < valFrac {
		return Val
	}
	return Train
}

// SplitIndices returns the indices of c's texts that fall on each side, in index order.
func SplitIndices(c Corpus, valFrac float64) (train, val []int) {
	for i := 0; i < c.NumTexts(); i++ {
		if SplitOf(c.TextID(i), valFrac) == Val {
			val = append(val, i)
		} else {
			train = append(train, i)
		}
	}
	return train, val
}
