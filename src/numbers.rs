//! Numbers as people read them in messages: `12,345` (one rule for every
//! message of the program, issue 13).

use std::fmt;
use std::time::Duration;

/// `n` with a comma every three digits: `1,234,567`. Formats without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thousands(pub u64);

impl fmt::Display for Thousands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        // The digits, least significant first: u64::MAX has 20.
        let mut digits = [0u8; 20];
        let (mut n, mut len) = (self.0, 0);
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for i in (0..len).rev() {
            f.write_char(char::from(digits[i]))?;
            if i > 0 && i % 3 == 0 {
                f.write_char(',')?;
            }
        }
        Ok(())
    }
}

/// `n` with a comma every three digits, as text.
pub fn thousands(n: u64) -> String {
    Thousands(n).to_string()
}

/// `1 packet`, `2,500 packets`: a count and its noun, plural unless one.
#[derive(Debug, Clone, Copy)]
pub struct Count<'a>(pub u64, pub &'a str);

impl fmt::Display for Count<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Count(n, noun) = *self;
        write!(
            f,
            "{} {noun}{}",
            Thousands(n),
            if n == 1 { "" } else { "s" }
        )
    }
}

/// A duration as a person reads it: `42s`, `3m 05s`, `2h 01m`.
pub struct Elapsed(pub Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs();
        match s {
            0..=59 => write!(f, "{}.{}s", s, self.0.subsec_millis() / 100),
            60..=3599 => write!(f, "{}m {:02}s", s / 60, s % 60),
            _ => write!(f, "{}h {:02}m", s / 3600, s % 3600 / 60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comma_every_three_digits() {
        for (n, text) in [
            (0, "0"),
            (7, "7"),
            (999, "999"),
            (1_000, "1,000"),
            (65_507, "65,507"),
            (100_000, "100,000"),
            (1_234_567, "1,234,567"),
            (u64::MAX, "18,446,744,073,709,551,615"),
        ] {
            assert_eq!(thousands(n), text);
        }
    }

    #[test]
    fn a_count_names_its_noun_in_the_singular_only_for_one() {
        assert_eq!(Count(1, "packet").to_string(), "1 packet");
        assert_eq!(Count(0, "row").to_string(), "0 rows");
        assert_eq!(Count(2_500, "datagram").to_string(), "2,500 datagrams");
    }
}
