//! Sample statistics the engine and the reports share.

/// n, mean, population and sample stddev, min, median, max of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 when n < 2.
    pub stddev: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(samples: &[f64]) -> Option<Self> {
        let _ = samples;
        todo!()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WelchTest {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Welch's unequal-variance two-sample t-test (statrs has none). None when either side has n < 2.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<WelchTest> {
    let _ = (a, b);
    todo!()
}
