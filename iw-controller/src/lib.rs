//! The initial-window (IW) controller.
//!
//! This crate will hold TCP-RL's discounted-UCB bandit with its sliding decision space, the
//! bottom-up user grouping over network features (province, ISP, subnet), the geolocation
//! database, and the compact prefix -> IW table that a datapath consults synchronously when a
//! flow is created. See `PAPERS.md` §1.1. Nothing is implemented here yet.
