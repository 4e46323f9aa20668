//! Which part of the probe policy made a flow's decision ([`Part`]).

/// The part of the probe policy that made a flow's latest decision: [`crate::Explanation::by`],
/// the `by` of the selector's swap events and log lines (`ccp-agent` logs each swap) and of
/// `ccp-eval`'s `decisions.csv`, so a run can say what each part's moves earned (`selector.md`,
/// "What each part's moves earned").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The probe's models at its end (the default, also when they keep the start).
    Models,
    /// The competitors' kind at the probe's end ([`super::kind`]).
    Kind,
    /// A rule's box at the probe's end ([`super::rule`]).
    Rule,
    /// A mode's start-up hand-over ([`super::Handover`]).
    Handover,
    /// A forced run's switch (training data, [`super::ProbeChoice::Force`]).
    Forced,
    /// The trial of a proposed switch ([`super::trial`]).
    Trial,
    /// A watch that fired after the choice ([`super::watch`]).
    Watch,
    /// The later models, at the end of their window.
    LaterModels,
    /// The second look at the competitors' kind.
    LaterKind,
    /// The policy the flow handed over to ([`super::delegate`]).
    Delegate,
}

impl Part {
    /// Every part, in the order above.
    pub const ALL: [Part; 10] = [
        Part::Models,
        Part::Kind,
        Part::Rule,
        Part::Handover,
        Part::Forced,
        Part::Trial,
        Part::Watch,
        Part::LaterModels,
        Part::LaterKind,
        Part::Delegate,
    ];

    /// The name `decisions.csv` writes.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::Models => "models",
            Part::Kind => "kind",
            Part::Rule => "rule",
            Part::Handover => "handover",
            Part::Forced => "forced",
            Part::Trial => "trial",
            Part::Watch => "watch",
            Part::LaterModels => "later-models",
            Part::LaterKind => "later-kind",
            Part::Delegate => "delegate",
        }
    }
}
