//! The random program generator: programs from a grammar, driven by the seeded PRNG.

use std::fmt::Write as _;

use crate::Rng;

// ---------------------------------------------------------------------------------------------
// The random program generator.

const NUM_PRIMS: &[&str] = &[
    "Ack.bytes_acked",
    "Ack.bytes_misordered",
    "Ack.ecn_bytes",
    "Ack.ecn_packets",
    "Ack.lost_pkts_sample",
    "Ack.now",
    "Ack.packets_acked",
    "Ack.packets_misordered",
    "Flow.bytes_in_flight",
    "Flow.bytes_pending",
    "Flow.packets_in_flight",
    "Flow.rate_incoming",
    "Flow.rate_outgoing",
    "Flow.rtt_sample_us",
];
const NUM_OPS: &[&str] = &["+", "-", "*", "/", "max", "min", "wrapped_max"];

struct Gen<'r> {
    rng: &'r mut Rng,
    num_reports: Vec<String>,
    bool_reports: Vec<String>,
    controls: Vec<String>,
    locals: Vec<String>,
    next_local: usize,
}

impl Gen<'_> {
    fn imm(&mut self) -> String {
        let v: u64 = match self.rng.below(10) {
            0..=4 => self.rng.below(11),
            5..=7 => self.rng.below(100_000),
            8 => self.rng.below(1 << 31),
            _ => *self.rng.pick(&[0, 1, 10, 1448, 0x3fff_ffff, (1 << 31) - 1]),
        };
        v.to_string()
    }

    fn default_value(&mut self) -> String {
        match self.rng.below(6) {
            0 => "+infinity".to_string(),
            1 => "1073741823".to_string(),
            _ => self.imm(),
        }
    }

    fn num_atom(&mut self) -> String {
        let r = self.rng.below(20);
        match r {
            0..=6 => (*self.rng.pick(NUM_PRIMS)).to_string(),
            7..=9 if !self.num_reports.is_empty() => self.rng.pick(&self.num_reports).clone(),
            10 | 11 if !self.controls.is_empty() => self.rng.pick(&self.controls).clone(),
            12 if !self.locals.is_empty() => self.rng.pick(&self.locals).clone(),
            13 => "Cwnd".to_string(),
            14 => (*self.rng.pick(&["Rate", "Micros"])).to_string(),
            _ => self.imm(),
        }
    }

    fn num_expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.chance(1, 3) {
            return self.num_atom();
        }
        let op = *self.rng.pick(NUM_OPS);
        let l = self.num_expr(depth - 1);
        let r = self.num_expr(depth - 1);
        format!("({op} {l} {r})")
    }

    fn bool_atom(&mut self) -> String {
        match self.rng.below(4) {
            0 if !self.bool_reports.is_empty() => self.rng.pick(&self.bool_reports).clone(),
            1 => "Flow.was_timeout".to_string(),
            2 => "true".to_string(),
            _ => "false".to_string(),
        }
    }

    /// A boolean operation (never a bare atom: portus wants an operation or a literal at the
    /// top of a `when`).
    fn bool_op(&mut self, depth: u32) -> String {
        if depth >= 2 && self.rng.chance(1, 3) {
            let op = *self.rng.pick(&["&&", "||"]);
            let l = self.bool_expr(depth - 1);
            let r = self.bool_expr(depth - 1);
            return format!("({op} {l} {r})");
        }
        let op = *self.rng.pick(&[">", "<", "=="]);
        let l = self.num_expr(depth - 1);
        let r = self.num_expr(depth - 1);
        format!("({op} {l} {r})")
    }

    fn bool_expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.chance(1, 4) {
            return self.bool_atom();
        }
        self.bool_op(depth)
    }

    fn condition(&mut self) -> String {
        match self.rng.below(16) {
            0 | 1 => "true".to_string(),
            2 => "false".to_string(),
            _ => {
                let d = self.rng.range(1, 3) as u32;
                self.bool_op(d)
            }
        }
    }

    /// A Report or control register (the targets of `if`, `!if` and `ewma`).
    fn stateful_target(&mut self) -> Option<String> {
        let n = self.num_reports.len() + self.controls.len();
        if n == 0 {
            return None;
        }
        let i = self.rng.below(n as u64) as usize;
        Some(if i < self.num_reports.len() {
            self.num_reports[i].clone()
        } else {
            self.controls[i - self.num_reports.len()].clone()
        })
    }

    fn statement(&mut self) -> String {
        loop {
            match self.rng.below(40) {
                0..=11 => {
                    if let Some(t) = self.stateful_target() {
                        let d = self.rng.below(4) as u32;
                        return format!("(:= {t} {})", self.num_expr(d));
                    }
                }
                12..=17 => {
                    if let Some(t) = self.stateful_target() {
                        let d = self.rng.below(3) as u32;
                        let e = match self.rng.below(3) {
                            0 => format!("(if {} {})", self.bool_expr(2), self.num_expr(d)),
                            1 => format!("(!if {} {})", self.bool_expr(2), self.num_expr(d)),
                            _ => format!("(ewma {} {})", self.rng.below(12), self.num_expr(d + 1)),
                        };
                        return format!("(:= {t} {e})");
                    }
                }
                18..=20 => {
                    if self.next_local < 6 && (self.locals.is_empty() || self.rng.chance(1, 2)) {
                        let name = format!("l{}", self.next_local);
                        self.next_local += 1;
                        let s = format!("(:= {name} {})", self.num_expr(2));
                        self.locals.push(name);
                        return s;
                    } else if !self.locals.is_empty() {
                        let name = self.rng.pick(&self.locals).clone();
                        return format!("(:= {name} {})", self.num_expr(3));
                    }
                }
                21 | 22 => {
                    if !self.bool_reports.is_empty() {
                        let t = self.rng.pick(&self.bool_reports).clone();
                        return format!("(:= {t} {})", self.bool_expr(3));
                    }
                }
                23..=27 => return format!("(:= Cwnd {})", self.num_expr(3)),
                28..=30 => return format!("(:= Rate {})", self.num_expr(2)),
                31..=34 => return "(report)".to_string(),
                35..=37 => return "(fallthrough)".to_string(),
                38 => return format!("(:= Micros {})", self.imm()),
                _ => return format!("(:= Cwnd (+ Cwnd {}))", self.num_atom()),
            }
        }
    }

    fn program(&mut self) -> String {
        let mut defs = String::from("(def (Report");
        for i in 0..self.rng.range(1, 5) {
            let vol = if self.rng.chance(1, 2) {
                "volatile "
            } else {
                ""
            };
            if self.rng.chance(1, 6) {
                let b = if self.rng.chance(1, 2) {
                    "true"
                } else {
                    "false"
                };
                write!(defs, " ({vol}b{i} {b})").unwrap();
                self.bool_reports.push(format!("Report.b{i}"));
            } else {
                let v = self.default_value();
                write!(defs, " ({vol}r{i} {v})").unwrap();
                self.num_reports.push(format!("Report.r{i}"));
            }
        }
        defs += ")";
        for i in 0..self.rng.below(4) {
            let vol = if self.rng.chance(1, 3) {
                "volatile "
            } else {
                ""
            };
            let v = self.default_value();
            write!(defs, " ({vol}c{i} {v})").unwrap();
            self.controls.push(format!("c{i}"));
        }
        defs += ")\n";
        let mut out = defs;
        for _ in 0..self.rng.range(1, 4) {
            let cond = self.condition();
            write!(out, "(when {cond}").unwrap();
            for _ in 0..self.rng.range(1, 5) {
                out += "\n    ";
                out += &self.statement();
            }
            out += ")\n";
        }
        out
    }
}

pub(crate) fn random_program(rng: &mut Rng) -> String {
    Gen {
        rng,
        num_reports: Vec::new(),
        bool_reports: Vec::new(),
        controls: Vec::new(),
        locals: Vec::new(),
        next_local: 0,
    }
    .program()
}
