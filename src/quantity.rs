//! Kubernetes resource quantities (`4`, `500m`, `10Gi`): exact parsing, canonical printing, arithmetic and serde.
#![forbid(unsafe_code)]

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Kubernetes keeps no precision finer than one nano unit, so nanos are the exact grain.
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Kubernetes' int64 accessors (`Value()`) stop here; beyond it a quota can't be read back.
const MAX_UNITS: i128 = i64::MAX as i128;
const MAX_NANOS: i128 = MAX_UNITS * NANOS_PER_UNIT;
/// `MAX_NANOS` has 28 digits, so a 30-digit magnitude is over the cap without computing it,
/// and 29 digits still fit an i128 with room to scale.
const MAX_DIGITS: usize = 29;

const DECIMAL_SI: [(&str, i64); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];

/// Index `i` is 1024^i; the empty suffix belongs to DecimalSI when parsing.
const BINARY_SI: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Which family of suffixes a quantity was written with, so it is printed back the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Powers of 1000 (`500m`, `4`, `10k`, `2G`).
    #[default]
    DecimalSI,
    /// Powers of 1024 (`512Mi`, `10Gi`).
    BinarySI,
    /// Powers of ten written as an exponent (`12e6`).
    DecimalExponent,
}

/// Why a string is not a quantity (or not one fabrik accepts), worded for the person who typed it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "an empty value is not a quantity: expected a number with an optional suffix, such as 4, 500m, 1.5 or 10Gi"
    )]
    Empty,
    #[error("{input:?} contains whitespace: write the number and its suffix with no spaces, such as 10Gi")]
    Whitespace { input: String },
    #[error("{input:?} is not a quantity: expected a number with an optional suffix, such as 4, 500m, 1.5 or 10Gi")]
    NotANumber { input: String },
    #[error(
        "{input:?} has an unknown suffix {suffix:?}: use one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent such as e3"
    )]
    UnknownSuffix { input: String, suffix: String },
    #[error("{input:?} has an exponent with no digits: put the power of ten after the e, such as 1e3 or 5e-2")]
    MissingExponent { input: String },
    #[error("{input:?} is too large: quantities are limited to {}", limit_text(.negative))]
    TooLarge { input: String, negative: bool },
    #[error("{input:?} is negative: a GPU quota must be 0 or more")]
    Negative { input: String },
    #[error("{input:?} is not a whole number: extended resources such as GPUs are counted in whole devices")]
    NotWhole { input: String },
}

fn limit_text(negative: &bool) -> &'static str {
    if *negative { "magnitudes of 9223372036854775807" } else { "9223372036854775807" }
}

/// An exact Kubernetes quantity. Equality, ordering and hashing look at the value only,
/// so `1`, `1000m` and `1e0` are the same quantity whatever their format.
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    /// Value × 10^9, always within ±`MAX_NANOS`.
    nanos: i128,
    format: Format,
}

impl Quantity {
    /// Parses the Kubernetes quantity grammar, e.g. `4`, `-1.5`, `500m`, `10Gi`, `1e3`.
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        parse_quantity(input)
    }

    pub const fn zero() -> Self {
        Self { nanos: 0, format: Format::DecimalSI }
    }

    /// `value` whole units. `i64::MIN` is clamped to `-i64::MAX`, the most negative value
    /// a quantity can hold, so the constructor never fails.
    pub fn from_int(value: i64, format: Format) -> Self {
        let units = i128::from(value).max(-MAX_UNITS);
        Self { nanos: units * NANOS_PER_UNIT, format }
    }

    /// `value` thousandths of a unit.
    pub fn from_milli(value: i64, format: Format) -> Self {
        Self { nanos: i128::from(value) * (NANOS_PER_UNIT / 1000), format }
    }

    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// Whether the value is a whole number of units (`2`, `1Ki`; not `1500m`).
    pub fn is_integer(self) -> bool {
        self.nanos % NANOS_PER_UNIT == 0
    }

    /// Whole units, rounded away from zero like Kubernetes' `Value()` (`1500m` → 2).
    /// Always fits: the cap keeps the magnitude within `i64::MAX`.
    pub fn value(self) -> i64 {
        saturate_i64(div_away_from_zero(self.nanos, NANOS_PER_UNIT))
    }

    /// Thousandths of a unit, rounded away from zero like `MilliValue()`. Where Kubernetes
    /// silently overflows (beyond about 9.2P), this saturates at `i64::MAX`/`i64::MIN`.
    pub fn milli_value(self) -> i64 {
        saturate_i64(div_away_from_zero(self.nanos, NANOS_PER_UNIT / 1000))
    }

    /// Approximate value for display, gauges and ratios; never for comparing quotas.
    pub fn as_f64(self) -> f64 {
        self.nanos as f64 / 1e9
    }

    pub fn format(self) -> Format {
        self.format
    }

    /// Exact sum, or `None` beyond the cap. The result keeps the left operand's format,
    /// except that a zero left operand takes the right one's, as in Kubernetes, so totals
    /// summed from `zero()` still print as `Gi`.
    pub fn checked_add(self, rhs: Self) -> Option<Self> {
        Self::bounded(self.nanos.checked_add(rhs.nanos)?, self.result_format(rhs))
    }

    /// Exact difference, or `None` beyond the cap; formats combine as in `checked_add`.
    pub fn checked_sub(self, rhs: Self) -> Option<Self> {
        Self::bounded(self.nanos.checked_sub(rhs.nanos)?, self.result_format(rhs))
    }

    fn bounded(nanos: i128, format: Format) -> Option<Self> {
        (-MAX_NANOS..=MAX_NANOS).contains(&nanos).then_some(Self { nanos, format })
    }

    fn saturated(nanos: i128, format: Format) -> Self {
        Self { nanos: nanos.clamp(-MAX_NANOS, MAX_NANOS), format }
    }

    fn result_format(self, rhs: Self) -> Format {
        if self.is_zero() { rhs.format } else { self.format }
    }

    /// The format the canonical string uses: BinarySI only works for whole byte counts of
    /// at least 1Ki, anything else would need rounding, so it falls back to DecimalSI.
    fn display_format(self) -> Format {
        match self.format {
            Format::BinarySI if self.nanos.abs() < 1024 * NANOS_PER_UNIT || !self.is_integer() => Format::DecimalSI,
            format => format,
        }
    }

    /// Kubernetes' canonical form: the largest suffix that leaves no fractional digits.
    fn canonical(self) -> String {
        if self.nanos == 0 {
            return "0".to_owned();
        }
        match self.display_format() {
            Format::BinarySI => {
                let mut units = self.nanos / NANOS_PER_UNIT;
                let mut power = 0;
                while power + 1 < BINARY_SI.len() && units % 1024 == 0 {
                    units /= 1024;
                    power += 1;
                }
                format!("{units}{}", BINARY_SI.get(power).copied().unwrap_or_default())
            }
            format => {
                // Exponents stay multiples of three, so DecimalSI always has a suffix for
                // them and DecimalExponent reads like engineering notation (1500e-3).
                let mut mantissa = self.nanos;
                let mut exponent: i64 = -9;
                while mantissa % 1000 == 0 {
                    mantissa /= 1000;
                    exponent += 3;
                }
                let si_suffix = DECIMAL_SI
                    .iter()
                    .find(|(_, e)| *e == exponent)
                    .map(|(suffix, _)| *suffix)
                    .filter(|_| format == Format::DecimalSI);
                match si_suffix {
                    Some(suffix) => format!("{mantissa}{suffix}"),
                    None if exponent == 0 => format!("{mantissa}"),
                    None => format!("{mantissa}e{exponent}"),
                }
            }
        }
    }
}

/// Parses a quota for an extended resource such as `nvidia.com/gpu`: a whole number of
/// devices, zero or more (`4`, `0`, `1k`; not `-1` or `1.5`).
pub fn parse_whole_count(input: &str) -> Result<Quantity, QuantityError> {
    let quantity = Quantity::parse(input)?;
    if quantity.is_negative() {
        return Err(QuantityError::Negative { input: input.to_owned() });
    }
    if !quantity.is_integer() {
        return Err(QuantityError::NotWhole { input: input.to_owned() });
    }
    Ok(quantity)
}

fn div_away_from_zero(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    match (value % divisor).signum() {
        1 => quotient + 1,
        -1 => quotient - 1,
        _ => quotient,
    }
}

fn saturate_i64(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

enum Scale {
    /// × 10^n
    Decimal(i64),
    /// × 2^n
    Binary(u32),
}

fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::Empty);
    }
    if input.chars().any(char::is_whitespace) {
        return Err(QuantityError::Whitespace { input: input.to_owned() });
    }
    let not_a_number = || QuantityError::NotANumber { input: input.to_owned() };
    let bytes = input.as_bytes();
    let (negative, mut pos) = match bytes.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let int_digits = digits_at(bytes, pos);
    pos += int_digits.len();
    let mut frac_digits: &[u8] = &[];
    if bytes.get(pos) == Some(&b'.') {
        frac_digits = digits_at(bytes, pos + 1);
        pos += 1 + frac_digits.len();
    }
    // Kubernetes reads ".", "+" and "-" as zero; they are not in its grammar, so refuse them.
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(not_a_number());
    }
    // Everything scanned so far is ASCII, so `pos` is a char boundary.
    let suffix = input.get(pos..).unwrap_or_default();
    if suffix.starts_with(['.', '+', '-']) {
        return Err(not_a_number());
    }
    let (scale, mut format) = interpret_suffix(input, suffix)?;

    let mut digits: Vec<u8> = int_digits.iter().chain(frac_digits).map(|b| b - b'0').skip_while(|&d| d == 0).collect();
    if digits.is_empty() {
        return Ok(Quantity { nanos: 0, format });
    }
    let frac_len = i64::try_from(frac_digits.len()).unwrap_or(i64::MAX);
    let exp10 = match scale {
        Scale::Decimal(exponent) => exponent.saturating_sub(frac_len),
        Scale::Binary(power) => {
            digits = multiply_digits(&digits, 1u64 << power);
            -frac_len
        }
    };
    let magnitude = scaled_nanos(&digits, exp10)
        .filter(|m| *m <= MAX_NANOS)
        .ok_or_else(|| QuantityError::TooLarge { input: input.to_owned(), negative })?;
    // Kubernetes does the same: a fraction of a byte has no binary spelling.
    if format == Format::BinarySI && magnitude < NANOS_PER_UNIT {
        format = Format::DecimalSI;
    }
    Ok(Quantity { nanos: if negative { -magnitude } else { magnitude }, format })
}

fn digits_at(bytes: &[u8], from: usize) -> &[u8] {
    let rest = bytes.get(from..).unwrap_or_default();
    let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    rest.get(..len).unwrap_or_default()
}

fn interpret_suffix(input: &str, suffix: &str) -> Result<(Scale, Format), QuantityError> {
    if let Some((_, exponent)) = DECIMAL_SI.iter().find(|(s, _)| *s == suffix) {
        return Ok((Scale::Decimal(*exponent), Format::DecimalSI));
    }
    if let Some(index) = BINARY_SI.iter().skip(1).position(|s| *s == suffix) {
        let power = 10 * (u32::try_from(index).unwrap_or(0) + 1);
        return Ok((Scale::Binary(power), Format::BinarySI));
    }
    let unknown = || QuantityError::UnknownSuffix { input: input.to_owned(), suffix: suffix.to_owned() };
    // A bare "E" is exa and matched above, so only a longer e/E suffix is an exponent.
    let exponent = suffix.strip_prefix(['e', 'E']).ok_or_else(unknown)?;
    let (exp_negative, exp_digits) = match exponent.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, exponent.strip_prefix('+').unwrap_or(exponent)),
    };
    if exp_digits.is_empty() {
        return Err(QuantityError::MissingExponent { input: input.to_owned() });
    }
    if !exp_digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(unknown());
    }
    // Saturating is exact enough: any exponent near i64::MAX is far past the cap, and
    // any near i64::MIN leaves every digit below 1n.
    let magnitude = exp_digits.bytes().fold(0i64, |acc, b| acc.saturating_mul(10).saturating_add(i64::from(b - b'0')));
    let exponent = if exp_negative { -magnitude } else { magnitude };
    Ok((Scale::Decimal(exponent), Format::DecimalExponent))
}

/// Multiplies a big-endian decimal digit string by `factor`, so binary suffixes on
/// fractions (`0.025Ti`) stay exact without a bignum dependency.
fn multiply_digits(digits: &[u8], factor: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(digits.len() + 20);
    let mut carry: u128 = 0;
    for &digit in digits.iter().rev() {
        let product = u128::from(digit) * u128::from(factor) + carry;
        out.push((product % 10) as u8);
        carry = product / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    out
}

/// The nano-unit magnitude of `digits × 10^exp10`, rounded away from zero like Kubernetes
/// so that asking for a sliver of a resource still asks for some; `None` when it cannot be
/// under the cap. `digits` is non-empty and has no leading zero.
fn scaled_nanos(digits: &[u8], exp10: i64) -> Option<i128> {
    let shift = exp10.saturating_add(9);
    if let Ok(up) = usize::try_from(shift) {
        if digits.len().saturating_add(up) > MAX_DIGITS {
            return None;
        }
        let mut value = digits_value(digits)?;
        for _ in 0..up {
            value = value.checked_mul(10)?;
        }
        return Some(value);
    }
    let down = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
    let Some(keep) = digits.len().checked_sub(down).filter(|&keep| keep > 0) else {
        // Every significant digit is below 1n.
        return Some(1);
    };
    if keep > MAX_DIGITS {
        return None;
    }
    let (whole, dropped) = digits.split_at(keep);
    let value = digits_value(whole)?;
    if dropped.iter().any(|&d| d != 0) { value.checked_add(1) } else { Some(value) }
}

fn digits_value(digits: &[u8]) -> Option<i128> {
    digits.iter().try_fold(0i128, |acc, &d| acc.checked_mul(10)?.checked_add(i128::from(d)))
}

impl Default for Quantity {
    fn default() -> Self {
        Self::zero()
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::parse(input)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` so table columns can use `{:>8}`.
        f.pad(&self.canonical())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

/// Saturates at ±`i64::MAX` units; use `checked_add` where overflow must be noticed.
impl Add for Quantity {
    type Output = Self;

    fn add(self, rhs: Self) -> Self {
        Self::saturated(self.nanos.saturating_add(rhs.nanos), self.result_format(rhs))
    }
}

/// Saturates at ±`i64::MAX` units; use `checked_sub` where overflow must be noticed.
impl Sub for Quantity {
    type Output = Self;

    fn sub(self, rhs: Self) -> Self {
        Self::saturated(self.nanos.saturating_sub(rhs.nanos), self.result_format(rhs))
    }
}

impl AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Self) {
        *self = *self + rhs;
    }
}

impl SubAssign for Quantity {
    fn sub_assign(&mut self, rhs: Self) {
        *self = *self - rhs;
    }
}

/// Saturating total, starting from `zero()` so the first term's format carries through.
impl Sum for Quantity {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::zero(), Add::add)
    }
}

impl<'a> Sum<&'a Quantity> for Quantity {
    fn sum<I: Iterator<Item = &'a Quantity>>(iter: I) -> Self {
        iter.copied().sum()
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl<'de> Visitor<'de> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quantity such as \"4\", \"500m\" or \"10Gi\", or a number")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        // Kubernetes trims surrounding whitespace when decoding (though not when parsing),
        // so objects it accepted must decode here too.
        Quantity::parse(v.trim()).map_err(E::custom)
    }

    // Numbers go through their decimal text, so they get exactly the string rules.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Quantity, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        // Rust prints the shortest text that reads back as `v`, never in exponent form.
        self.visit_str(&v.to_string())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Quantity, E> {
        Ok(Quantity::zero())
    }

    fn visit_none<E: de::Error>(self) -> Result<Quantity, E> {
        Ok(Quantity::zero())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Quantity, D::Error> {
        Quantity::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests;
