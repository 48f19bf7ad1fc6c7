//! The simulated circuit: a closed loop of straights and corners in the ground plane,
//! with gentle hills.
//!
//! Every piece has a curvature that is linear along it, so a corner is an entry
//! spiral (curvature 0 → 1/r), an arc (1/r) and an exit spiral (1/r → 0): steering,
//! lateral acceleration and yaw rate then rise and fall smoothly instead of jumping
//! at the first metre of the arc. Positions come from integrating the heading along
//! the piece (Simpson's rule; the heading itself is exact), and the two straights
//! marked [`Piece::Closing`] are sized at start-up so that the loop ends exactly
//! where it began, heading the same way.
//!
//! Conventions (ours; docs/formats.md does not fix them): the ground plane is world X/Z,
//! Y is up; a heading ψ points along (sin ψ, cos ψ) in (X, Z), so ψ = 0 faces +Z; a
//! right turn increases ψ, and curvature is positive in right turns.

use std::f64::consts::{PI, TAU};

/// Length of the spirals into and out of every corner, m.
const SPIRAL: f64 = 20.0;
/// Simpson intervals used to integrate one piece (even).
const STEPS: usize = 16;

/// One piece of the circuit as designed.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// A straight this many metres long.
    Straight(f64),
    /// A corner turning this many degrees (positive right) at this radius, m.
    Corner(f64, f64),
    /// A straight whose length closes the loop (there are exactly two).
    Closing,
}

/// The circuit as designed: start/finish line at the start of the first straight.
/// Corner radii from a 32 m hairpin to a 120 m sweeper; one left-right chicane.
const DESIGN: [Piece; 11] = [
    Piece::Straight(200.0),
    Piece::Corner(90.0, 40.0),
    Piece::Straight(160.0),
    Piece::Corner(-40.0, 75.0),
    Piece::Corner(40.0, 75.0),
    Piece::Straight(200.0),
    Piece::Corner(110.0, 120.0),
    Piece::Closing,
    Piece::Corner(70.0, 32.0),
    Piece::Closing,
    Piece::Corner(90.0, 60.0),
];

/// The number of segments [`DESIGN`] lays out into: three per corner, one per straight.
const SEGMENTS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < DESIGN.len() {
        n += match DESIGN[i] {
            Piece::Corner(..) => 3,
            _ => 1,
        };
        i += 1;
    }
    n
};

/// Amplitudes (m) of the two hills: one rise over the lap, and three smaller ones.
const HILLS: [f64; 2] = [6.0, 2.0];

/// A stretch of constant or linearly changing curvature.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Segment {
    /// Distance of its start from the line, m.
    pub start: f64,
    /// Its length, m.
    pub len: f64,
    /// Curvature at its start and end, 1/m, positive turning right.
    pub k0: f64,
    /// See `k0`.
    pub k1: f64,
    /// Heading at its start, rad.
    heading: f64,
    /// Ground-plane position of its start, (X, Z) m.
    x: f64,
    z: f64,
    /// Index of the corner it belongs to, if any (0 = the first corner).
    pub corner: Option<usize>,
}

impl Segment {
    /// Curvature `u` metres in.
    fn curvature(&self, u: f64) -> f64 {
        self.k0 + (self.k1 - self.k0) * u / self.len
    }

    /// Heading `u` metres in: the integral of the curvature.
    fn heading_at(&self, u: f64) -> f64 {
        self.heading + self.k0 * u + (self.k1 - self.k0) * u * u / (2.0 * self.len)
    }

    /// Ground-plane displacement from its start to `u` metres in.
    fn displacement(&self, u: f64) -> (f64, f64) {
        if u <= 0.0 {
            return (0.0, 0.0);
        }
        // Simpson's rule on (sin ψ, cos ψ); ψ is a quadratic of u, so 16 intervals
        // over at most ~100 m and 90° are accurate to well under a millimetre.
        let h = u / STEPS as f64;
        let (mut x, mut z) = (0.0, 0.0);
        for i in 0..=STEPS {
            let w = match i {
                0 => 1.0,
                _ if i == STEPS => 1.0,
                _ if i % 2 == 1 => 4.0,
                _ => 2.0,
            };
            let psi = self.heading_at(i as f64 * h);
            x += w * psi.sin();
            z += w * psi.cos();
        }
        (x * h / 3.0, z * h / 3.0)
    }
}

/// Where the car is on the circuit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pose {
    /// Ground-plane position, m.
    pub x: f64,
    /// Height, m.
    pub y: f64,
    /// Ground-plane position, m.
    pub z: f64,
    /// Heading, rad (not wrapped: it grows by 2π a lap).
    pub heading: f64,
    /// Curvature, 1/m, positive turning right.
    pub curvature: f64,
    /// dy/ds: the road's grade.
    pub grade: f64,
    /// d²y/ds²: the road's vertical curvature.
    pub bend: f64,
}

/// The circuit, laid out once.
#[derive(Debug, Clone)]
pub(super) struct Track {
    segments: [Segment; SEGMENTS],
    /// Lap length along the ground, m.
    pub len: f64,
}

impl Track {
    /// Lays out [`DESIGN`], sizing the two closing straights.
    pub fn new() -> Track {
        let mut segments = [Segment::default(); SEGMENTS];
        let mut count = 0;
        let mut closing = [0usize; 2];
        let mut closings = 0;
        let mut corners = 0;
        let mut push = |len: f64, k0: f64, k1: f64, corner: Option<usize>| {
            segments[count] = Segment {
                len,
                k0,
                k1,
                corner,
                ..Segment::default()
            };
            count += 1;
            count - 1
        };
        for piece in DESIGN {
            match piece {
                Piece::Straight(len) => {
                    push(len, 0.0, 0.0, None);
                }
                Piece::Closing => {
                    // Sized below, once the rest is laid out.
                    closing[closings] = push(1.0, 0.0, 0.0, None);
                    closings += 1;
                }
                Piece::Corner(degrees, radius) => {
                    let turn = degrees.to_radians();
                    let k = turn.signum() / radius;
                    // Each spiral turns k·SPIRAL/2, so the arc turns the rest.
                    let arc = turn.abs() * radius - SPIRAL;
                    push(SPIRAL, 0.0, k, Some(corners));
                    push(arc, k, k, Some(corners));
                    push(SPIRAL, k, 0.0, Some(corners));
                    corners += 1;
                }
            }
        }
        let mut track = Track { segments, len: 0.0 };
        // Headings do not depend on straight lengths: lay out with the closing
        // straights at 0 m, then solve a·d(ψa) + b·d(ψb) = −gap for their lengths.
        for &i in &closing {
            track.segments[i].len = 0.0;
        }
        track.lay_out();
        let (gx, gz) = track.end();
        let (ha, hb) = (
            track.segments[closing[0]].heading,
            track.segments[closing[1]].heading,
        );
        let det = ha.sin() * hb.cos() - ha.cos() * hb.sin();
        let a = (-gx * hb.cos() + gz * hb.sin()) / det;
        let b = (-gz * ha.sin() + gx * ha.cos()) / det;
        track.segments[closing[0]].len = a;
        track.segments[closing[1]].len = b;
        track.lay_out();
        track
    }

    /// Fills in every segment's start distance, heading and position from the
    /// lengths and curvatures, and the lap length.
    fn lay_out(&mut self) {
        let (mut s, mut heading, mut x, mut z) = (0.0, 0.0, 0.0, 0.0);
        for seg in &mut self.segments {
            seg.start = s;
            seg.heading = heading;
            seg.x = x;
            seg.z = z;
            if seg.len > 0.0 {
                let (dx, dz) = seg.displacement(seg.len);
                x += dx;
                z += dz;
                heading = seg.heading_at(seg.len);
            }
            s += seg.len;
        }
        self.len = s;
    }

    /// Where the last segment ends, relative to the line.
    fn end(&self) -> (f64, f64) {
        let last = &self.segments[SEGMENTS - 1];
        let (dx, dz) = last.displacement(last.len);
        (last.x + dx, last.z + dz)
    }

    /// The segments in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The segment holding distance `s` (taken modulo the lap).
    pub fn segment_at(&self, s: f64) -> (usize, f64) {
        let s = s.rem_euclid(self.len);
        let i = self
            .segments()
            .iter()
            .rposition(|seg| seg.start <= s)
            .unwrap_or(0);
        (i, s - self.segments[i].start)
    }

    /// The pose `s` metres from the line (modulo the lap).
    pub fn pose(&self, s: f64) -> Pose {
        let (i, u) = self.segment_at(s);
        let seg = &self.segments[i];
        let (dx, dz) = seg.displacement(u);
        let (y, grade, bend) = self.elevation(s);
        Pose {
            x: seg.x + dx,
            y,
            z: seg.z + dz,
            heading: seg.heading_at(u),
            curvature: seg.curvature(u),
            grade,
            bend,
        }
    }

    /// Height, grade and vertical curvature at `s`: periodic over the lap.
    fn elevation(&self, s: f64) -> (f64, f64, f64) {
        let w = TAU / self.len;
        let (a, b) = (HILLS[0], HILLS[1]);
        let (p, q) = (w * s, 3.0 * w * s + 1.0);
        let y = a * p.sin() + b * q.sin();
        let grade = a * w * p.cos() + 3.0 * b * w * q.cos();
        let bend = -a * w * w * p.sin() - 9.0 * b * w * w * q.sin();
        (y, grade, bend)
    }

    /// The fastest a car whose lateral grip is `grip` (m/s²) may go at `s`: the
    /// grip limit here, and for every arc ahead its grip limit raised by the
    /// distance to it, braking at `brake` (m/s²) on the way and at `trail` in its
    /// entry spiral, where the growing cornering force leaves less grip to brake.
    pub fn speed_limit(&self, s: f64, grip: f64, brake: f64, trail: f64, top: f64) -> f64 {
        let (here, u) = self.segment_at(s);
        let seg = &self.segments[here];
        let k = seg.curvature(u).abs();
        let mut limit = if k > 0.0 { (grip / k).sqrt() } else { top };
        // One lap ahead. Only arcs bind: a spiral's sharpest point is an arc's end.
        let mut ahead = seg.len - u;
        for step in 1..=SEGMENTS {
            let next = &self.segments[(here + step) % SEGMENTS];
            if next.k0 == next.k1 && next.k0 != 0.0 {
                let corner = grip / next.k0.abs();
                let spiral = ahead.min(SPIRAL);
                let room = 2.0 * trail * spiral + 2.0 * brake * (ahead - spiral);
                limit = limit.min((corner + room).sqrt());
            }
            ahead += next.len;
        }
        limit.min(top)
    }
}

/// `a` wrapped into (−π, π].
pub(super) fn wrap_angle(a: f64) -> f64 {
    let w = a.rem_euclid(TAU);
    if w > PI {
        w - TAU
    } else {
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_closes_in_position_and_heading() {
        let t = Track::new();
        let start = t.pose(0.0);
        let (ex, ez) = t.end();
        assert!(ex.abs() < 1e-6 && ez.abs() < 1e-6, "ends at ({ex}, {ez})");
        let last = t.segments()[SEGMENTS - 1];
        let heading = last.heading_at(last.len);
        assert!((heading - TAU).abs() < 1e-9, "turns {heading} rad in a lap");
        assert_eq!((start.x, start.z, start.heading), (0.0, 0.0, 0.0));
        // Both closing straights came out as real straights, and the lap is ~1.7 km.
        for seg in t.segments() {
            assert!(seg.len > 10.0, "{seg:?}");
        }
        assert!((1_600.0..1_900.0).contains(&t.len), "lap {} m", t.len);
        let corners = t.segments().iter().filter_map(|s| s.corner).max();
        assert_eq!(corners, Some(5), "six corners");
    }

    #[test]
    fn position_is_continuous_and_moves_along_the_heading() {
        let t = Track::new();
        let step = 0.5;
        let mut s = 0.0;
        let mut prev = t.pose(0.0);
        while s < 2.0 * t.len {
            s += step;
            let p = t.pose(s);
            let (dx, dz) = (p.x - prev.x, p.z - prev.z);
            let moved = dx.hypot(dz);
            assert!((moved - step).abs() < 1e-3, "moved {moved} m at s = {s}");
            // The chord points along the mean heading.
            let mean = prev.heading + wrap_angle(p.heading - prev.heading) / 2.0;
            let along = dx * mean.sin() + dz * mean.cos();
            assert!((along - moved).abs() < 1e-4, "off the heading at s = {s}");
            prev = p;
        }
    }

    #[test]
    fn curvature_is_continuous_and_signed_by_the_turn() {
        let t = Track::new();
        let mut prev = t.pose(0.0).curvature;
        let mut s = 0.0;
        let (mut left, mut right) = (false, false);
        while s < t.len {
            s += 0.25;
            let k = t.pose(s).curvature;
            assert!((k - prev).abs() < 0.001, "curvature jumps at s = {s}");
            left |= k < -0.01;
            right |= k > 0.01;
            prev = k;
        }
        assert!(left && right, "the circuit turns both ways");
    }

    #[test]
    fn speed_limit_falls_before_each_corner() {
        let t = Track::new();
        let (grip, brake, trail, top): (f64, f64, f64, f64) = (12.0, 10.0, 4.0, 90.0);
        let limit = |s| t.speed_limit(s, grip, brake, trail, top);
        // On the arc of the first corner (radius 40 m) the limit is sqrt(grip·r).
        let arc = t.segments()[2];
        let corner = grip * 40.0;
        assert!((limit(arc.start + arc.len / 2.0) - corner.sqrt()).abs() < 1e-9);
        // 100 m before its 20 m entry spiral: braking distance on top.
        let at = t.segments()[1].start - 100.0;
        let want = (corner + 2.0 * trail * 20.0 + 2.0 * brake * 100.0).sqrt();
        assert!((limit(at) - want).abs() < 1e-9, "{} vs {want}", limit(at));
        // Halfway into the spiral, only trail braking is left.
        let at = t.segments()[1].start + 10.0;
        assert!((limit(at) - (corner + 2.0 * trail * 10.0).sqrt()).abs() < 1e-9);
        // Out of the arc, the limit rises through the exit spiral.
        let exit = t.segments()[3];
        assert!(limit(exit.start + 5.0) < limit(exit.start + 15.0));
        // 5 m past the line, it is the braking curve from the first corner.
        let want = (corner + 2.0 * trail * 20.0 + 2.0 * brake * 195.0).sqrt();
        assert!((limit(5.0) - want).abs() < 1e-9, "{} vs {want}", limit(5.0));
        // Where no corner is near enough, the car's top speed.
        assert_eq!(t.speed_limit(5.0, grip, 100.0, trail, top), top);
    }
}
