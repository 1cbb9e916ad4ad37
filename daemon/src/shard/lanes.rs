//! The jobs a shard has taken off its channel, in FIFO lanes.
//!
//! A shard is the FIFO queue of everything in its slots: one thread applies
//! its requests one at a time. Left as a single FIFO, one hot envelope (ten
//! thousand users grabbing at once) would fill whole groups with its grabs
//! and everything behind them — other envelopes, short links, limits — would
//! wait for all of them. So requests that name an envelope (grab, info) go
//! to that envelope's own lane, everything else to the general lane, and a
//! group is filled round-robin:
//!
//! - each round takes one job from every envelope lane with work, and as
//!   many from the general lane as there are envelope lanes (at least one),
//!   so other requests get at least half of a contended group and every
//!   envelope an equal share of the rest;
//! - the rotation carries over between groups, so lanes cut off by a full
//!   group go first next time.
//!
//! Order is kept where it is promised: within a lane jobs stay FIFO, and all
//! requests for one key are in one lane (one envelope's requests in its
//! lane; every other key's in the general lane), so requests for the same
//! key on one connection still apply in the order they were sent.
//!
//! Per-envelope admission control counts an envelope's lane: the shard asks
//! the envelope service whether to queue a grab, with the lane's depth (see
//! `Envelopes::admit`), before it is pushed here.

use super::Job;
use hashbrown::HashMap;
use rush_protocol::Request;
use std::collections::VecDeque;

/// Lanes deeper than this are reported as hot (metrics).
const HOT_DEPTH: usize = 16;

#[derive(Default)]
pub struct Lanes {
    general: VecDeque<Job>,
    envelopes: HashMap<u64, VecDeque<Job>>,
    /// Envelope lanes with jobs, in round-robin order.
    rotation: VecDeque<u64>,
    len: usize,
    /// Deepest each hot envelope lane got since the last `take_peaks`.
    peaks: HashMap<u64, usize>,
}

impl Lanes {
    /// The envelope whose lane a request belongs to; `None`: general lane.
    pub fn envelope_of(request: &Request) -> Option<u64> {
        match request {
            Request::EnvelopeGrab(g) => Some(g.id),
            Request::EnvelopeInfo(i) => Some(i.id),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Jobs waiting in an envelope's lane.
    pub fn depth(&self, envelope: u64) -> usize {
        self.envelopes.get(&envelope).map_or(0, VecDeque::len)
    }

    pub fn push(&mut self, job: Job) {
        self.len += 1;
        let Some(id) = Self::envelope_of(&job.request) else {
            self.general.push_back(job);
            return;
        };
        let lane = self.envelopes.entry(id).or_default();
        if lane.is_empty() {
            self.rotation.push_back(id);
        }
        lane.push_back(job);
        if lane.len() >= HOT_DEPTH {
            let peak = self.peaks.entry(id).or_default();
            *peak = (*peak).max(lane.len());
        }
    }

    /// Move the next group (at most `max` jobs) into `out`, round-robin.
    pub fn next_group(&mut self, max: usize, out: &mut Vec<Job>) {
        while out.len() < max && self.len > 0 {
            let general_share = self.rotation.len().max(1);
            for _ in 0..general_share {
                if out.len() >= max {
                    break;
                }
                match self.general.pop_front() {
                    Some(job) => {
                        self.len -= 1;
                        out.push(job);
                    }
                    None => break,
                }
            }
            for _ in 0..self.rotation.len() {
                if out.len() >= max {
                    break;
                }
                let Some(id) = self.rotation.pop_front() else {
                    break;
                };
                let Some(lane) = self.envelopes.get_mut(&id) else {
                    continue;
                };
                if let Some(job) = lane.pop_front() {
                    self.len -= 1;
                    out.push(job);
                }
                if lane.is_empty() {
                    self.envelopes.remove(&id);
                } else {
                    self.rotation.push_back(id);
                }
            }
        }
    }

    /// The hot lanes' peak depths since the last call (for metrics).
    pub fn take_peaks(&mut self) -> HashMap<u64, usize> {
        std::mem::take(&mut self.peaks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::ReplyTo;
    use bytes::Bytes;
    use rush_protocol::cmd::{EnvelopeGrab, Get};

    fn grab(id: u64, user: &str) -> Job {
        job(EnvelopeGrab {
            id,
            user: Bytes::copy_from_slice(user.as_bytes()),
        }
        .into())
    }

    fn get(key: &str) -> Job {
        job(Get {
            key: Bytes::copy_from_slice(key.as_bytes()),
        }
        .into())
    }

    fn job(request: Request) -> Job {
        let (tx, _rx) = tokio::sync::oneshot::channel();
        Job {
            request,
            reply: ReplyTo::Once(tx),
        }
    }

    fn describe(jobs: &[Job]) -> Vec<String> {
        jobs.iter()
            .map(|j| match &j.request {
                Request::EnvelopeGrab(g) => {
                    format!("{}:{}", g.id, String::from_utf8_lossy(&g.user))
                }
                Request::Get(g) => String::from_utf8_lossy(&g.key).into_owned(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_hot_envelope_does_not_starve_the_others() {
        let mut lanes = Lanes::default();
        for i in 0..100 {
            lanes.push(grab(1, &format!("u{i}")));
        }
        lanes.push(grab(2, "x"));
        lanes.push(get("k1"));
        lanes.push(get("k2"));
        assert_eq!(lanes.len(), 103);
        assert_eq!(lanes.depth(1), 100);
        let mut group = Vec::new();
        lanes.next_group(6, &mut group);
        // General gets as many as there are envelope lanes; each envelope one
        // per round; envelope 2 and both keys are served in the first group.
        assert_eq!(
            describe(&group),
            ["k1", "k2", "1:u0", "2:x", "1:u1", "1:u2"]
        );
        let mut group = Vec::new();
        lanes.next_group(1000, &mut group);
        assert_eq!(group.len(), 97);
        // One lane stays FIFO.
        assert_eq!(describe(&group)[0], "1:u3");
        assert_eq!(describe(&group)[96], "1:u99");
        assert!(lanes.is_empty() && lanes.envelopes.is_empty() && lanes.rotation.is_empty());
        assert_eq!(lanes.take_peaks().get(&1), Some(&100));
    }

    #[test]
    fn rotation_carries_over_between_groups() {
        let mut lanes = Lanes::default();
        for id in 1..=4 {
            lanes.push(grab(id, "a"));
            lanes.push(grab(id, "b"));
        }
        let mut group = Vec::new();
        lanes.next_group(3, &mut group);
        assert_eq!(describe(&group), ["1:a", "2:a", "3:a"]);
        group.clear();
        lanes.next_group(3, &mut group);
        assert_eq!(describe(&group), ["4:a", "1:b", "2:b"]);
        group.clear();
        lanes.next_group(3, &mut group);
        assert_eq!(describe(&group), ["3:b", "4:b"]);
    }
}
