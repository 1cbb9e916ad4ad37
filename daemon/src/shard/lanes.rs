//! Requests a shard has read but not yet run, in FIFO lanes.
//!
//! A shard runs up to `storage.max_batch` requests a pass; what it reads
//! beyond that waits here for the next passes (and past
//! `storage.queue_depth` waiting requests, new ones are answered BUSY).
//! Left as a single FIFO, one hot key — ten thousand users grabbing one
//! envelope at once — would fill whole passes and everything behind it
//! would wait for all of it. So a service may name a lane for a request
//! ([`ShardService::lane`](super::service::ShardService::lane): the
//! envelope service names one per envelope), everything else goes to the
//! general lane, and a pass is filled round-robin:
//!
//! - each round takes one request from every keyed lane with work, and as
//!   many from the general lane as there are keyed lanes (at least one), so
//!   other requests get at least half of a contended pass and every key an
//!   equal share of the rest;
//! - the rotation carries over between passes, so lanes cut off by a full
//!   pass go first next time.
//!
//! Order is kept where it is promised: within a lane requests stay FIFO,
//! and all requests for one key are in one lane, so requests for the same
//! key on one connection still apply in the order they were sent (while
//! anything waits here, new requests wait behind it).
//!
//! Admission control counts a lane: before a request waits or runs, its
//! service may answer it at once given how many of its lane already wait
//! ([`ShardService::admit`](super::service::ShardService::admit)).

use hashbrown::HashMap;
use std::collections::VecDeque;

/// Lanes deeper than this are reported as hot (metrics).
const HOT_DEPTH: usize = 16;

pub struct Lanes<T> {
    general: VecDeque<T>,
    /// Keyed lanes (e.g. one per envelope).
    envelopes: HashMap<u64, VecDeque<T>>,
    /// Envelope lanes with jobs, in round-robin order.
    rotation: VecDeque<u64>,
    len: usize,
    /// Deepest each hot envelope lane got since the last `take_peaks`.
    peaks: HashMap<u64, usize>,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Lanes {
            general: VecDeque::new(),
            envelopes: HashMap::new(),
            rotation: VecDeque::new(),
            len: 0,
            peaks: HashMap::new(),
        }
    }
}

impl<T> Lanes<T> {
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

    /// Queue a job in lane `lane` (`None`: the general lane).
    pub fn push(&mut self, lane: Option<u64>, job: T) {
        self.len += 1;
        let Some(id) = lane else {
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
    pub fn next_group(&mut self, max: usize, out: &mut Vec<T>) {
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

    /// Remember that `depth` requests of lane `lane` waited at once (those
    /// queued and those waiting for the current commit).
    pub fn note_depth(&mut self, lane: u64, depth: usize) {
        if depth >= HOT_DEPTH {
            let peak = self.peaks.entry(lane).or_default();
            *peak = (*peak).max(depth);
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
    use crate::shard::{Job, ReplyTo};
    use bytes::Bytes;
    use rush_protocol::cmd::{EnvelopeGrab, Get};
    use rush_protocol::Request;

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

    /// As the shard does: envelope requests in their envelope's lane.
    fn push(lanes: &mut Lanes<Job>, job: Job) {
        let lane = match &job.request {
            Request::EnvelopeGrab(g) => Some(g.id),
            _ => None,
        };
        lanes.push(lane, job);
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
        let mut lanes: Lanes<Job> = Lanes::default();
        for i in 0..100 {
            push(&mut lanes, grab(1, &format!("u{i}")));
        }
        push(&mut lanes, grab(2, "x"));
        push(&mut lanes, get("k1"));
        push(&mut lanes, get("k2"));
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
        let mut lanes: Lanes<Job> = Lanes::default();
        for id in 1..=4 {
            push(&mut lanes, grab(id, "a"));
            push(&mut lanes, grab(id, "b"));
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
