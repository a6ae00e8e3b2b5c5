//! A profile's context budget: what a budgeted profile (`tool_budget_tokens`, `max_tools`)
//! lists. When every visible tool fits, they are listed raw; when not, the facade is listed
//! plus, within the budget, the tools the user pins (`always_show`) and then the tools this
//! profile's clients call most.
//!
//! Tokens are estimated here, not counted with o200k: the tokenizer's tables cost the daemon
//! about 46 MB of memory and 180 ms to load, more than the whole daemon. The estimate follows
//! o200k's pre-tokenizer (words, numbers, punctuation runs) and was fitted on the 1,055
//! definitions of the tool-retrieval data sets: 3-5% above o200k's count in total, 0.96-1.12
//! of it for 90% of single definitions. `mcp-broker measure` prints the exact count.

/// Letters one o200k token covers at most, for the estimate (most words up to ten letters are
/// one token).
const LETTERS_PER_TOKEN: usize = 10;
/// Punctuation characters one token covers (JSON's `":"`, `"},{"` merge).
const PUNCT_PER_TOKEN: usize = 4;
/// Tokens per ideograph or other wide character.
const WIDE_PER_TOKEN: f64 = 0.8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    None,
    Lower,
    Upper,
    Digit,
    Punct,
    Space,
    Wide,
}

fn kind(c: char) -> Run {
    if c.is_ascii_lowercase() {
        Run::Lower
    } else if c.is_ascii_uppercase() {
        Run::Upper
    } else if c.is_ascii_digit() {
        Run::Digit
    } else if c.is_whitespace() {
        Run::Space
    } else if c.is_ascii() {
        Run::Punct
    } else if c.is_alphabetic() && u32::from(c) < 0x2E80 {
        // Accented and non-Latin alphabets pre-tokenize like ASCII words.
        Run::Lower
    } else {
        Run::Wide
    }
}

fn cost(run: Run, len: usize) -> f64 {
    if len == 0 {
        return 0.0;
    }
    match run {
        Run::Lower | Run::Upper => (1 + (len - 1) / LETTERS_PER_TOKEN) as f64,
        Run::Digit => len.div_ceil(3) as f64,
        Run::Punct => len.div_ceil(PUNCT_PER_TOKEN) as f64,
        Run::Space => 1.0,
        Run::Wide => len as f64 * WIDE_PER_TOKEN,
        Run::None => 0.0,
    }
}

/// Estimated o200k_base tokens of `text` (see the module's note on its accuracy).
pub fn estimate_tokens(text: &str) -> usize {
    let mut total = 0.0f64;
    let (mut run, mut len) = (Run::None, 0usize);
    for c in text.chars() {
        let k = kind(c);
        let joins = match (run, k) {
            // A space joins the word after it.
            (Run::Space, Run::Lower | Run::Upper) => {
                run = k;
                len = 0;
                true
            }
            // `JSONPath`: capitals, then lower case, are one word; lower then upper splits.
            (Run::Upper, Run::Lower) | (Run::Upper, Run::Upper) => true,
            (Run::Lower, Run::Upper) => false,
            (a, b) => a == b,
        };
        if !joins {
            total += cost(run, len);
            run = k;
            len = 0;
        } else if run == Run::Upper && k == Run::Lower {
            run = Run::Lower;
        }
        len += 1;
    }
    total += cost(run, len);
    total.ceil() as usize
}

/// One visible tool as the budget sees it.
pub struct Candidate<'a> {
    /// `<upstream>.<tool>`, as `always_show` names it.
    pub dotted: &'a str,
    /// As the profile's clients call it (and the call counts name it).
    pub exposed: &'a str,
    /// Its listed definition's estimated tokens.
    pub tokens: usize,
}

/// What a budgeted profile lists.
#[derive(Debug, PartialEq, Eq)]
pub enum Choice {
    /// Every visible tool, raw: they fit.
    Raw,
    /// The facade, plus these tools (indexes into the candidates), pinned ones first.
    Facade(Vec<usize>),
}

/// The budget's limits: tokens of the listing, and tools in it (the facade's included).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub tokens: Option<usize>,
    pub tools: Option<usize>,
}

impl Budget {
    pub fn of(profile: &mcpb_config::ProfileSettings) -> Option<Self> {
        if profile.compact_tools_enabled
            || (profile.tool_budget_tokens.is_none() && profile.max_tools.is_none())
        {
            return None;
        }
        Some(Self {
            tokens: profile.tool_budget_tokens.map(|t| t as usize),
            tools: profile.max_tools.map(|t| t as usize),
        })
    }

    fn fits(&self, tokens: usize, tools: usize) -> bool {
        self.tokens.is_none_or(|b| tokens <= b) && self.tools.is_none_or(|b| tools <= b)
    }

    /// Raw when every candidate fits, or costs no more than the facade would; else the facade (`facade` tools of `facade_tokens`) and,
    /// while they fit, the `always_show` tools and then the most called (`calls` of an exposed
    /// name), in that order. The facade itself always stays, whatever the budget.
    pub fn choose(
        &self,
        candidates: &[Candidate<'_>],
        facade: (usize, usize),
        always_show: &[String],
        calls: &dyn Fn(&str) -> u64,
    ) -> Choice {
        // The listing's brackets and commas cost about a token per tool.
        let raw: usize = candidates.iter().map(|c| c.tokens + 1).sum();
        let (facade_tools, facade_tokens) = facade;
        let smaller = raw <= facade_tokens && candidates.len() <= facade_tools;
        if smaller || self.fits(raw, candidates.len()) {
            return Choice::Raw;
        }
        let mut order: Vec<(usize, bool, u64)> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pinned = always_show.iter().any(|a| a == c.dotted);
                (i, pinned, calls(c.exposed))
            })
            .filter(|(_, pinned, n)| *pinned || *n > 0)
            .collect();
        // Pinned first, then by calls; ties keep the listing's order.
        order.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        let (mut tokens, mut tools) = (facade_tokens, facade_tools);
        let mut chosen = Vec::new();
        for (i, _, _) in order {
            let t = candidates[i].tokens + 1;
            if self.fits(tokens + t, tools + 1) {
                tokens += t;
                tools += 1;
                chosen.push(i);
            }
        }
        chosen.sort_unstable();
        Choice::Facade(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_words_numbers_and_punctuation_runs() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("read the file"), 3);
        assert_eq!(estimate_tokens("readFile"), 2);
        assert_eq!(estimate_tokens("JSONPath"), 1);
        assert_eq!(estimate_tokens("{\"a\":\"b\"}"), 5);
        assert_eq!(estimate_tokens("12345"), 2);
        assert_eq!(estimate_tokens("搜索关键词"), 4);
    }

    fn cands<'a>(names: &'a [&'a str], tokens: usize) -> Vec<Candidate<'a>> {
        names
            .iter()
            .map(|n| Candidate {
                dotted: n,
                exposed: n,
                tokens,
            })
            .collect()
    }

    #[test]
    fn tools_that_fit_are_raw_and_else_the_facade_takes_pins_then_the_most_called() {
        let names = ["a.x", "a.y", "b.z", "b.w"];
        let c = cands(&names, 99);
        let budget = Budget {
            tokens: Some(400),
            tools: None,
        };
        assert_eq!(budget.choose(&c, (7, 100), &[], &|_| 0), Choice::Raw);
        let tiny = Budget {
            tokens: Some(10),
            tools: Some(1),
        };
        assert_eq!(
            tiny.choose(&c, (7, 900), &[], &|_| 0),
            Choice::Raw,
            "never a facade that costs more than the tools"
        );
        let small = Budget {
            tokens: Some(350),
            tools: None,
        };
        assert_eq!(
            small.choose(&c, (7, 100), &[], &|_| 0),
            Choice::Facade(vec![])
        );
        let calls = |n: &str| match n {
            "b.w" => 9,
            "a.y" => 3,
            _ => 0,
        };
        // 100 + 2 x 100 fit, a third does not: the pin, then the most called.
        assert_eq!(
            small.choose(&c, (7, 100), &["b.z".into()], &calls),
            Choice::Facade(vec![2, 3])
        );
        let by_count = Budget {
            tokens: None,
            tools: Some(3),
        };
        assert_eq!(
            by_count.choose(&c, (2, 100), &[], &calls),
            Choice::Facade(vec![3])
        );
    }
}
