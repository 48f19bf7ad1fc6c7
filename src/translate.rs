//! Rewriting a packet from one format into another (docs/formats.md "Translation rules").
//!
//! Pure: no I/O, no logging, no allocation. Every one of the 36 format pairs has a
//! copy plan built at compile time from the [`Layout`](crate::wire::Layout) rows: a
//! few block copies and zero-fills, the WheelInPuddle conversion when the two
//! formats type it differently, and the CarClass mapping between fh4/fh5 and fh6.
//! A compile-time check proves that every plan writes each output byte exactly once
//! and reads only inside the input, so a reused, dirty buffer comes out clean.

use crate::wire::{field, Block, Error, Format, Puddle, Value};

/// Rewrites `input`, a `from` packet, as a `to` packet in the start of `out`, and
/// returns the output length (`to.len()`).
///
/// Writes every byte of `out[..to.len()]`. Blocks the input lacks are zero-filled
/// (a `sled` input gives Speed 0 and so on). Errors, without touching `out`, when
/// `input` is not exactly `from.len()` bytes or `out` is shorter than `to.len()`.
#[inline]
pub fn translate(input: &[u8], from: Format, to: Format, out: &mut [u8]) -> Result<usize, Error> {
    if input.len() != from.len() {
        return Err(Error::Length {
            format: from,
            actual: input.len(),
        });
    }
    let len = to.len();
    let Some(out) = out.get_mut(..len) else {
        return Err(Error::OutputTooSmall {
            format: to,
            actual: out.len(),
        });
    };
    KERNELS[from.index()][to.index()](input, out);
    Ok(len)
}

/// Runs the plan of one (from, to) pair, a constant here: the step loop unrolls,
/// every copy has a constant length and no bounds check survives, so short copies
/// become inline moves and long ones a bare memcpy. (Interpreting the plan at run
/// time cost 12-14 ns for fh6 -> fh5; this is 6 ns, see the translate bench.)
fn kernel<const FROM: usize, const TO: usize>(input: &[u8], out: &mut [u8]) {
    let plan: &Plan = const { &PLANS[FROM][TO] };
    let (from, to) = (Format::ALL[FROM], Format::ALL[TO]);
    let input = &input[..const { Format::ALL[FROM].len() }];
    let out = &mut out[..const { Format::ALL[TO].len() }];
    for step in &plan.steps[..plan.len] {
        match *step {
            Step::Copy { src, dst, len } => {
                out[dst..dst + len].copy_from_slice(&input[src..src + len]);
            }
            Step::Zero { dst, len } => out[dst..dst + len].fill(0),
            Step::Puddle => {
                let at = field::WHEEL_IN_PUDDLE.offset;
                let value = <crate::wire::Wheels<Puddle>>::read(&input[at..], from);
                value.write(&mut out[at..], to);
            }
            Step::Class(map) => {
                let at = field::CAR_CLASS.offset;
                let class = i32::read(&input[at..], from);
                map_class(class, map).write(&mut out[at..], to);
            }
        }
    }
}

/// A translation kernel: `input` is a whole `from` packet, `out` exactly `to.len()`.
type Kernel = fn(&[u8], &mut [u8]);

macro_rules! kernels {
    ($($from:literal)*) => { [$([
        kernel::<$from, 0>, kernel::<$from, 1>, kernel::<$from, 2>,
        kernel::<$from, 3>, kernel::<$from, 4>, kernel::<$from, 5>,
    ],)*] };
}

/// [`kernel`] for every (from, to), indexed by [`Format::index`].
static KERNELS: [[Kernel; 6]; 6] = kernels!(0 1 2 3 4 5);

// `kernel::<I, J>` reads Format::ALL[I]: that must be the format whose index is I.
const _: () = {
    let mut i = 0;
    while i < Format::ALL.len() {
        assert!(Format::ALL[i].index() == i);
        i += 1;
    }
};

/// FH4/FH5 class index (D C B A S1 S2 X) → FH6 (D C B A S1 S2 R X), by letter.
const FH5_TO_FH6: &[i32] = &[0, 1, 2, 3, 4, 5, 7];
/// FH6 → FH4/FH5 by letter; R, which FH5 lacks, becomes the next lower class, S2.
const FH6_TO_FH5: &[i32] = &[0, 1, 2, 3, 4, 5, 5, 6];

/// Maps a class index through `map`; a value outside the scale passes unchanged.
fn map_class(class: i32, map: &[i32]) -> i32 {
    usize::try_from(class)
        .ok()
        .and_then(|i| map.get(i))
        .copied()
        .unwrap_or(class)
}

/// One step of a copy plan. Offsets are absolute in the input and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `out[dst..dst + len] = input[src..src + len]`.
    Copy { src: usize, dst: usize, len: usize },
    /// `out[dst..dst + len] = 0`.
    Zero { dst: usize, len: usize },
    /// Rewrite the four WheelInPuddle words from the input's type to the output's.
    Puddle,
    /// Rewrite CarClass through a class map.
    Class(&'static [i32]),
}

const MAX_STEPS: usize = 8;

/// The steps that turn one format into another.
#[derive(Debug, Clone, Copy)]
struct Plan {
    steps: [Step; MAX_STEPS],
    len: usize,
}

impl Plan {
    const fn push(mut self, step: Step) -> Self {
        // Coalesce with the previous step when contiguous: fh6 → fh6 is one memcpy.
        if self.len > 0 {
            let last = self.steps[self.len - 1];
            match (last, step) {
                (
                    Step::Copy { src, dst, len },
                    Step::Copy {
                        src: s2,
                        dst: d2,
                        len: l2,
                    },
                ) if src + len == s2 && dst + len == d2 => {
                    self.steps[self.len - 1] = Step::Copy {
                        src,
                        dst,
                        len: len + l2,
                    };
                    return self;
                }
                (Step::Zero { dst, len }, Step::Zero { dst: d2, len: l2 }) if dst + len == d2 => {
                    self.steps[self.len - 1] = Step::Zero { dst, len: len + l2 };
                    return self;
                }
                _ => {}
            }
        }
        self.steps[self.len] = step;
        self.len += 1;
        self
    }

    /// Copies `block` where both formats have it; zero-fills it where only the
    /// output has it; does nothing where the output lacks it.
    const fn block(self, from: Format, to: Format, block: Block) -> Self {
        match (from.layout().start(block), to.layout().start(block)) {
            (Some(src), Some(dst)) => self.push(Step::Copy {
                src,
                dst,
                len: block.len(),
            }),
            (None, Some(dst)) => self.push(Step::Zero {
                dst,
                len: block.len(),
            }),
            (_, None) => self,
        }
    }

    const fn new(from: Format, to: Format) -> Self {
        let mut plan = Plan {
            steps: [Step::Zero { dst: 0, len: 0 }; MAX_STEPS],
            len: 0,
        };
        // Blocks first, rewrites after: contiguous blocks coalesce into one long
        // copy (fh6 -> fh5 is one 324-byte copy, then the puddle and class words),
        // which is cheaper than copying around the rewritten words.
        plan = plan
            .block(from, to, Block::Sled)
            .block(from, to, Block::Horizon)
            .block(from, to, Block::Dash)
            .block(from, to, Block::Extras)
            .block(from, to, Block::Tail);
        if from.layout().puddle as u8 != to.layout().puddle as u8 {
            plan = plan.push(Step::Puddle);
        }
        match (from, to) {
            (Format::Fh4 | Format::Fh5, Format::Fh6) => plan.push(Step::Class(FH5_TO_FH6)),
            (Format::Fh6, Format::Fh4 | Format::Fh5) => plan.push(Step::Class(FH6_TO_FH5)),
            _ => plan,
        }
    }

    /// True when the plan reads only inside a `from` packet and writes every byte
    /// of a `to` packet exactly once (Puddle and Class rewrite bytes a Copy wrote).
    const fn is_sound(&self, from: Format, to: Format) -> bool {
        let mut written = [0u8; crate::wire::MAX_LEN];
        let mut i = 0;
        while i < self.len {
            let (dst, len) = match self.steps[i] {
                Step::Copy { src, dst, len } => {
                    if src + len > from.len() {
                        return false;
                    }
                    (dst, len)
                }
                Step::Zero { dst, len } => (dst, len),
                Step::Puddle | Step::Class(_) => (0, 0),
            };
            let mut b = dst;
            while b < dst + len {
                if b >= to.len() || written[b] != 0 {
                    return false;
                }
                written[b] = 1;
                b += 1;
            }
            i += 1;
        }
        let mut b = 0;
        while b < to.len() {
            if written[b] != 1 {
                return false;
            }
            b += 1;
        }
        true
    }
}

const PLANS: [[Plan; 6]; 6] = {
    let mut plans = [[Plan::new(Format::Sled, Format::Sled); 6]; 6];
    let mut i = 0;
    while i < 6 {
        let mut j = 0;
        while j < 6 {
            let (from, to) = (Format::ALL[i], Format::ALL[j]);
            plans[i][j] = Plan::new(from, to);
            assert!(plans[i][j].is_sound(from, to));
            j += 1;
        }
        i += 1;
    }
    plans
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Fields, Packet, Wheels, MAX_LEN};

    /// Distinct, named values for every field; each differs from the others so a
    /// field copied to the wrong place shows.
    fn sample_fields() -> Fields {
        Fields {
            is_race_on: 1,
            timestamp_ms: 123_456_789,
            engine_max_rpm: 8_500.5,
            engine_idle_rpm: 850.25,
            current_engine_rpm: 6_123.75,
            acceleration_x: 1.5,
            acceleration_y: -0.25,
            acceleration_z: 3.75,
            velocity_x: 2.5,
            velocity_y: 0.125,
            velocity_z: 40.5,
            angular_velocity_x: 0.01,
            angular_velocity_y: -0.02,
            angular_velocity_z: 0.03,
            yaw: 1.1,
            pitch: -0.05,
            roll: 0.07,
            normalized_suspension_travel: Wheels::from_array([0.41, 0.42, 0.43, 0.44]),
            tire_slip_ratio: Wheels::from_array([0.11, 0.12, 0.13, 0.14]),
            wheel_rotation_speed: Wheels::from_array([101.0, 102.0, 103.0, 104.0]),
            wheel_on_rumble_strip: Wheels::from_array([1, 0, 0, 1]),
            wheel_in_puddle: Wheels::default(),
            surface_rumble: Wheels::from_array([0.21, 0.22, 0.23, 0.24]),
            tire_slip_angle: Wheels::from_array([0.31, 0.32, 0.33, 0.34]),
            tire_combined_slip: Wheels::from_array([0.51, 0.52, 0.53, 0.54]),
            suspension_travel_meters: Wheels::from_array([0.061, 0.062, 0.063, 0.064]),
            car_ordinal: 3_456,
            car_class: 6,
            car_performance_index: 901,
            drivetrain_type: 2,
            num_cylinders: 8,
            car_group: Some(17),
            smashable_vel_diff: Some(4.5),
            smashable_mass: Some(250.0),
            position_x: Some(-1_234.5),
            position_y: Some(56.25),
            position_z: Some(7_890.125),
            speed: Some(41.0),
            power: Some(310_000.0),
            torque: Some(512.5),
            tire_temp: Some(Wheels::from_array([181.0, 182.0, 183.0, 184.0])),
            boost: Some(14.5),
            fuel: Some(0.75),
            distance_traveled: Some(12_345.5),
            best_lap: Some(83.25),
            last_lap: Some(84.5),
            current_lap: Some(12.75),
            current_race_time: Some(300.5),
            lap_number: Some(4),
            race_position: Some(2),
            accel: Some(250),
            brake: Some(3),
            clutch: Some(4),
            hand_brake: Some(5),
            gear: Some(6),
            steer: Some(-42),
            normalized_driving_line: Some(17),
            normalized_ai_brake_difference: Some(-9),
            tire_wear: Some(Wheels::from_array([0.91, 0.92, 0.93, 0.94])),
            track_ordinal: Some(860),
        }
    }

    /// A `format` packet holding [`sample_fields`], with puddles typed as the
    /// format types them and a tail byte of 0xA5.
    fn sample_packet(format: Format) -> [u8; MAX_LEN] {
        let mut fields = sample_fields();
        fields.wheel_in_puddle = match format.layout().puddle {
            crate::wire::PuddleKind::Flag => {
                Wheels::from_array([1, 0, 1, 0]).map(crate::wire::Puddle::Flag)
            }
            crate::wire::PuddleKind::Depth => {
                Wheels::from_array([0.5, 0.0, 0.25, 0.0]).map(crate::wire::Puddle::Depth)
            }
        };
        let mut buf = [0u8; MAX_LEN];
        let mut p = Packet::new_unchecked(&mut buf[..format.len()], format);
        fields.write(&mut p);
        p.set_tail_byte(0xA5);
        buf
    }

    /// `Some(v)` (or `Some(0)` where the input lacked it) when the output has the
    /// field, `None` when it doesn't.
    fn carry<T: Default>(input: Option<T>, output_has: bool) -> Option<T> {
        output_has.then(|| input.unwrap_or_default())
    }

    /// What translating `input` (read from a `from` packet) to `to` must give.
    fn expected(input: Fields, from: Format, to: Format) -> Fields {
        let has = |b: Block| to.layout().start(b).is_some();
        let (h, d, x) = (has(Block::Horizon), has(Block::Dash), has(Block::Extras));
        Fields {
            wheel_in_puddle: match to.layout().puddle {
                crate::wire::PuddleKind::Flag => {
                    input.wheel_in_puddle.map(|p| Puddle::Flag(p.flag()))
                }
                crate::wire::PuddleKind::Depth => {
                    input.wheel_in_puddle.map(|p| Puddle::Depth(p.depth()))
                }
            },
            car_class: match (from, to) {
                (Format::Fh4 | Format::Fh5, Format::Fh6) => map_class(input.car_class, FH5_TO_FH6),
                (Format::Fh6, Format::Fh4 | Format::Fh5) => map_class(input.car_class, FH6_TO_FH5),
                _ => input.car_class,
            },
            car_group: carry(input.car_group, h),
            smashable_vel_diff: carry(input.smashable_vel_diff, h),
            smashable_mass: carry(input.smashable_mass, h),
            position_x: carry(input.position_x, d),
            position_y: carry(input.position_y, d),
            position_z: carry(input.position_z, d),
            speed: carry(input.speed, d),
            power: carry(input.power, d),
            torque: carry(input.torque, d),
            tire_temp: carry(input.tire_temp, d),
            boost: carry(input.boost, d),
            fuel: carry(input.fuel, d),
            distance_traveled: carry(input.distance_traveled, d),
            best_lap: carry(input.best_lap, d),
            last_lap: carry(input.last_lap, d),
            current_lap: carry(input.current_lap, d),
            current_race_time: carry(input.current_race_time, d),
            lap_number: carry(input.lap_number, d),
            race_position: carry(input.race_position, d),
            accel: carry(input.accel, d),
            brake: carry(input.brake, d),
            clutch: carry(input.clutch, d),
            hand_brake: carry(input.hand_brake, d),
            gear: carry(input.gear, d),
            steer: carry(input.steer, d),
            normalized_driving_line: carry(input.normalized_driving_line, d),
            normalized_ai_brake_difference: carry(input.normalized_ai_brake_difference, d),
            tire_wear: carry(input.tire_wear, x),
            track_ordinal: carry(input.track_ordinal, x),
            ..input
        }
    }

    #[test]
    fn every_pair_carries_every_field_by_the_rules() {
        for from in Format::ALL {
            let input_buf = sample_packet(from);
            let input = &input_buf[..from.len()];
            let input_fields = Fields::read(&Packet::new_checked(input, from).unwrap());
            for to in Format::ALL {
                // A dirty buffer: every byte must be overwritten.
                let mut out = [0xEEu8; MAX_LEN + 8];
                let n = translate(input, from, to, &mut out).unwrap();
                assert_eq!(n, to.len(), "{from} -> {to}");
                let p = Packet::new_checked(&out[..n], to).unwrap();
                assert_eq!(
                    Fields::read(&p),
                    expected(input_fields, from, to),
                    "{from} -> {to}"
                );
                let tail = if from.is_horizon() { 0xA5 } else { 0 };
                assert_eq!(
                    p.tail_byte(),
                    to.is_horizon().then_some(tail),
                    "{from} -> {to}"
                );
                assert!(
                    out[n..].iter().all(|&b| b == 0xEE),
                    "{from} -> {to} wrote past its end"
                );
            }
        }
    }

    #[test]
    fn fh6_to_fh5_converts_puddles_and_class_by_name() {
        let input = sample_packet(Format::Fh6);
        let mut out = [0xFFu8; 324];
        translate(&input[..324], Format::Fh6, Format::Fh5, &mut out).unwrap();
        let p = Packet::new_checked(&out[..], Format::Fh5).unwrap();
        let puddle = p.wheel_in_puddle();
        assert_eq!(puddle.fl, Puddle::Depth(1.0));
        assert_eq!(puddle.fr, Puddle::Depth(0.0));
        assert_eq!(puddle.rl, Puddle::Depth(1.0));
        assert_eq!(puddle.rr, Puddle::Depth(0.0));
        assert_eq!(
            p.car_class(),
            5,
            "FH6 R has no FH5 letter: next lower is S2"
        );
        assert_eq!(p.speed(), Some(41.0));
        assert_eq!(p.gear(), Some(6));
        assert_eq!(p.car_group(), Some(17));
        assert_eq!(p.tail_byte(), Some(0xA5));
    }

    #[test]
    fn fh5_to_fh6_maps_x_and_thresholds_depth() {
        let mut input = sample_packet(Format::Fh5);
        Packet::new_unchecked(&mut input[..324], Format::Fh5).set_car_class(6);
        let mut out = [0u8; 324];
        translate(&input[..324], Format::Fh5, Format::Fh6, &mut out).unwrap();
        let p = Packet::new_checked(&out[..], Format::Fh6).unwrap();
        assert_eq!(p.car_class(), 7, "X is 6 in FH5 and 7 in FH6");
        let puddle = p.wheel_in_puddle();
        assert_eq!(puddle.fl, Puddle::Flag(1));
        assert_eq!(puddle.fr, Puddle::Flag(0));
        assert_eq!(puddle.rl, Puddle::Flag(1));
        assert_eq!(puddle.rr, Puddle::Flag(0));
    }

    #[test]
    fn class_maps_by_letter_and_passes_unknown_values() {
        let fh5 = Format::Fh5.layout().classes.unwrap();
        let fh6 = Format::Fh6.layout().classes.unwrap();
        for (i, letter) in fh5.iter().enumerate() {
            assert_eq!(fh6[FH5_TO_FH6[i] as usize], *letter);
        }
        for (i, letter) in fh6.iter().enumerate() {
            let mapped = fh5[FH6_TO_FH5[i] as usize];
            let expect = if *letter == "R" { "S2" } else { letter };
            assert_eq!(mapped, expect);
        }
        assert_eq!(map_class(-1, FH5_TO_FH6), -1);
        assert_eq!(map_class(99, FH6_TO_FH5), 99);
    }

    #[test]
    fn sled_input_zero_fills_dash_and_horizon() {
        let input = sample_packet(Format::Sled);
        let mut out = [0xCCu8; 324];
        translate(&input[..232], Format::Sled, Format::Fh6, &mut out).unwrap();
        let p = Packet::new_checked(&out[..], Format::Fh6).unwrap();
        assert_eq!(p.speed(), Some(0.0));
        assert_eq!(p.car_group(), Some(0));
        assert_eq!(p.tail_byte(), Some(0));
        assert_eq!(p.car_ordinal(), 3_456);
    }

    #[test]
    fn same_format_is_one_copy() {
        for f in Format::ALL {
            let plan = &PLANS[f.index()][f.index()];
            assert_eq!(plan.len, 1, "{f}");
            assert_eq!(
                plan.steps[0],
                Step::Copy {
                    src: 0,
                    dst: 0,
                    len: f.len()
                }
            );
        }
    }

    #[test]
    fn fh6_to_fh5_is_one_copy_then_the_rewrites() {
        let plan = &PLANS[Format::Fh6.index()][Format::Fh5.index()];
        assert_eq!(
            &plan.steps[..plan.len],
            &[
                Step::Copy {
                    src: 0,
                    dst: 0,
                    len: 324
                },
                Step::Puddle,
                Step::Class(FH6_TO_FH5)
            ]
        );
    }

    #[test]
    fn wrong_lengths_and_short_outputs_are_errors() {
        let garbage: Vec<u8> = (0..65_507u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut out = [0u8; MAX_LEN];
        for from in Format::ALL {
            for len in [0, 1, 323, 325, 65_507] {
                if len == from.len() {
                    continue;
                }
                for to in Format::ALL {
                    assert_eq!(
                        translate(&garbage[..len], from, to, &mut out),
                        Err(Error::Length {
                            format: from,
                            actual: len
                        })
                    );
                }
            }
            for to in Format::ALL {
                let mut short = [0u8; 100];
                assert_eq!(
                    translate(&garbage[..from.len()], from, to, &mut short),
                    Err(Error::OutputTooSmall {
                        format: to,
                        actual: 100
                    })
                );
            }
        }
    }

    mod round_trips {
        use super::*;
        use proptest::prelude::*;

        fn bytes_of(field: field::Field, buf: &[u8], format: Format) -> Option<&[u8]> {
            let at = field.start(format)?;
            Some(&buf[at..at + field.size])
        }

        proptest! {
            #[test]
            fn fh6_fh5_fh6_keeps_every_field(mut input in proptest::collection::vec(any::<u8>(), 324),
                flags in proptest::array::uniform4(0i32..=1))
            {
                for (i, f) in flags.iter().enumerate() {
                    input[132 + 4 * i..136 + 4 * i].copy_from_slice(&f.to_le_bytes());
                }
                let mut fh5 = [0u8; 324];
                let mut back = [0xAAu8; 324];
                translate(&input, Format::Fh6, Format::Fh5, &mut fh5).unwrap();
                translate(&fh5, Format::Fh5, Format::Fh6, &mut back).unwrap();
                for f in field::ALL {
                    let (a, b) = (bytes_of(*f, &input, Format::Fh6), bytes_of(*f, &back, Format::Fh6));
                    if f.name == "CarClass" {
                        let class = i32::from_le_bytes(a.unwrap().try_into().unwrap());
                        let expect = if class == 6 { 5 } else { class };
                        prop_assert_eq!(i32::from_le_bytes(b.unwrap().try_into().unwrap()), expect);
                    } else {
                        prop_assert_eq!(a, b, "{}", f.name);
                    }
                }
                prop_assert_eq!(back[323], input[323]);
            }

            #[test]
            fn fh5_fm7_fh5_keeps_every_shared_field(input in proptest::collection::vec(any::<u8>(), 324)) {
                let mut fm7 = [0u8; 311];
                let mut back = [0xAAu8; 324];
                translate(&input, Format::Fh5, Format::Fm7, &mut fm7).unwrap();
                translate(&fm7, Format::Fm7, Format::Fh5, &mut back).unwrap();
                for f in field::ALL {
                    let (a, b) = (bytes_of(*f, &input, Format::Fh5), bytes_of(*f, &back, Format::Fh5));
                    match f.block {
                        Block::Horizon => prop_assert!(b.unwrap().iter().all(|&x| x == 0), "{}", f.name),
                        _ => prop_assert_eq!(a, b, "{}", f.name),
                    }
                }
                prop_assert_eq!(back[323], 0);
            }
        }
    }
}
